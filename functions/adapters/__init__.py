"""The adapters: one module per AWS service the domain is served through."""
