"""Paired evaluation of routers on the same seeds and arrivals: results, tables and plots."""
