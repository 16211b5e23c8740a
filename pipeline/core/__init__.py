"""The core layer: errors and fault injection, atomic file writes, output layout, the content-
addressed cache and code digests, the config tree, schemas and composition, devices. It imports
nothing else of the project."""
