"""Pipeline stages. Each module exposes `run(...)` returning its (cached) output folder."""
