"""Complete examples the docs show and the tests run (docs/your-own-model.md)."""
