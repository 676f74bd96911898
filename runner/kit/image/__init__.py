"""Recipes to images: the recipes and their building blocks, the rendered Dockerfiles and
definitions, the local Debian base image, the engine, builds written in reproducible
form, their locks and verification, conversions (SIF, squashfs, docker-save) and pulls.
Imports kit.core."""
