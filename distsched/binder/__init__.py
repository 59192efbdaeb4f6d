"""The binder pool: binding cycles as rq jobs, apart from scheduling."""
