"""A campaign: the checked request, the loop with its rounds and stop rule, and the
studies' presets. Imports kit.core, kit.image, kit.runtimes, kit.launch, kit.results."""
