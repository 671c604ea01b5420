"""GPU types: the hardware catalog (``costmodel.hardware.CATALOG``) as stored, listable rows."""
