"""`python -m anonymizers.vc.train_ohnn`: the command name that configs and docs use for
`python -m anonymizers.training.ohnn` (the OHNN training recipe)."""
from anonymizers.training.ohnn import main

if __name__ == "__main__":
    main()
