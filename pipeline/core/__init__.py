"""The core layer: errors, file formats, the cache, config composition, schemas and checks,
devices. It imports nothing else of vpeval."""
