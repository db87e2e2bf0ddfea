"""Guest template images: recipes in ``recipes/`` (package data), built images in the state dir."""

from .build import BUILDER_VERSION, image_hash
from .recipe import Recipe, RecipeError, load_recipe
from .store import Image, current_image, ensure_image, list_images, load_image, recipe_names

__all__ = [
    "BUILDER_VERSION",
    "Image",
    "Recipe",
    "RecipeError",
    "current_image",
    "ensure_image",
    "image_hash",
    "list_images",
    "load_image",
    "load_recipe",
    "recipe_names",
]
