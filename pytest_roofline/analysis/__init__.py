"""Static analysis of GPU kernels, nothing run: the CUDA toolkit as a fact source (:mod:`.compiler`),
PTX and SASS reading (:mod:`.ptx`, :mod:`.sass`), theoretical occupancy (:mod:`.occupancy`), the
facts of one kernel (:mod:`.kernelfacts`) and why a measured kernel missed (:mod:`.diagnosis`).
"""
