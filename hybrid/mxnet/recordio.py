"""``mx.recordio``: MXNet's RecordIO reader, writer and record headers, from :mod:`hybrid.recordio`."""
from ..recordio import (IRHeader, MXIndexedRecordIO, MXRecordIO, RecordIOError, pack, pack_img, unpack,
                        unpack_img)

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img", "unpack_img",
           "RecordIOError"]
