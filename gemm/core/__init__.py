"""Pure data and rules: the registry, problems, launch geometry, shapes, metrics, the timing
policy, the tolerance rule and statistics. Nothing here touches a GPU or starts a process."""
