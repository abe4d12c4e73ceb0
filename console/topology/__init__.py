"""The host as a placement problem: GPUs, NUMA nodes, CPU affinity, PCIe links, plans."""
