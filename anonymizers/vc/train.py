"""`python -m anonymizers.vc.train`: the command name that configs and docs use for
`python -m anonymizers.training.vc` (the voice-converter training recipe)."""
from anonymizers.training.vc import main

if __name__ == "__main__":
    main()
