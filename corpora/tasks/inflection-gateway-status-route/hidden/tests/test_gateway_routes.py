"""Judged apart: the routes and the library run in the jail; this test compares their answers here."""

import unittest

from jail import call


def collection_path(model):
    return call("api.routes:collection_path", model)


class GatewayRouteTests(unittest.TestCase):
    def test_status_resources_are_not_pluralised(self):
        self.assertEqual(collection_path("Status"), "/status")
        self.assertEqual(collection_path("ShipmentStatus"), "/shipment_status")
        self.assertEqual(call("api.routes:item_path", "Status", 3), "/status/3")

    def test_other_models_unchanged(self):
        self.assertEqual(collection_path("Order"), "/orders")
        self.assertEqual(collection_path("Person"), "/people")

    def test_library_behaviour_untouched(self):
        self.assertEqual(call("inflection:pluralize", "status"), "statuses")


if __name__ == "__main__":
    unittest.main()
