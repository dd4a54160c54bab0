"""Pure core: manifests, the DRA model, stages and plans. No I/O beyond reading files in the loader."""
