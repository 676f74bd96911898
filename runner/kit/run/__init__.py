"""A campaign: the checked request (request, own_image, and the checks both share), the
loop with its rounds and stop rule, and the studies' presets. Imports kit.core, kit.image,
kit.runtimes, kit.launch, kit.results."""
