"""Your exercises, one file per activity: each notebook names the file it teaches, and you write
its pieces where a `raise NotImplementedError` stands."""
