"""REST paths for our models, as the API gateway exposes them."""

import inflection

GATEWAY_UNCOUNTABLE = {"status"}


def collection_path(model_name):
    """The collection path of a model: `OrderLine` -> `/order_lines`."""
    name = inflection.underscore(model_name)
    last = name.rsplit("_", 1)[-1]
    return "/" + (name if last in GATEWAY_UNCOUNTABLE else inflection.pluralize(name))


def item_path(model_name, item_id):
    """The path of one item: `OrderLine`, 7 -> `/order_lines/7`."""
    return f"{collection_path(model_name)}/{item_id}"
