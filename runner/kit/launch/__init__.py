"""How a trial starts and ends: launchers (this host or one Slurm job a trial), the trial's
process tree (process), and what the host did meanwhile (hostload). Imports kit.core,
kit.image and kit.runtimes."""
