"""The controller role (``stratalog operator``): LogDirs to cluster objects, Topics to assignments."""
