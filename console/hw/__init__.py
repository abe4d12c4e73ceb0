"""Hardware access: the only package that imports pynvml and psutil.

A GPU backend protocol with the real NVML implementation and a simulated host for demo mode;
NUMA facts from sysfs; process and host readings through psutil.
"""
