"""Benchmarks: workloads, the streaming load runner, statistics, campaigns and run results."""
