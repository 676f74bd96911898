"""A campaign: kit run's options (options, declared once), the checked request (request,
own_image, and the checks both share), the loop with its rounds and stop rule, a campaign's
run (start) and a preset's (preset_run, the studies' presets). Imports kit.core, kit.image,
kit.runtimes, kit.launch, kit.results."""
