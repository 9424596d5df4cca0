"""Experiments and benchmarks: speed-up, allreduce, tuning levers, large batch, phase breakdown.
"""
