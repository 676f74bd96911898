"""How a trial starts and ends: launchers (this host, a host list over ssh, or one Slurm job
a trial), the trial run to its end (supervise) with its processes (proctree), its output
(streams), a mount daemon left behind (mounts) and how it ended (outcomes), and what the
host did meanwhile (hostload). Imports kit.core, kit.image and kit.runtimes."""
