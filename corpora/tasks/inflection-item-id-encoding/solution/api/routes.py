"""REST paths for our models, as the API gateway exposes them."""

from urllib.parse import quote

import inflection


def collection_path(model_name):
    """The collection path of a model: `OrderLine` -> `/order_lines`."""
    return "/" + inflection.pluralize(inflection.underscore(model_name))


def item_path(model_name, item_id):
    """The path of one item: `OrderLine`, 7 -> `/order_lines/7`."""
    return f"{collection_path(model_name)}/{quote(str(item_id), safe='')}"
