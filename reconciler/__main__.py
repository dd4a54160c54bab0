"""`python -m reconciler` runs the same CLI as the `dra-gitops` console script."""

from reconciler.cli import main

if __name__ == "__main__":
    main()
