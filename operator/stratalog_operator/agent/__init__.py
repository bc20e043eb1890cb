"""The agent role (``stratalog agent``): the engine of one LogDir, driven by Topics and kopf timers."""
