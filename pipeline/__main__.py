from pipeline.app.cli import main

main()
