"""The headers between a capture record and its TCP segment, one small module per layer.

As in dpkt, each layer is a module with one job: read its header at the cursor
(:class:`~pwcap.capture.layers.cursor.Cursor`), check every byte it reads is there, move
the cursor to what it carries and say what that is (a code of :mod:`.codes`), or say why
the record is skipped. A tunnel layer also adds its id (a VLAN tag, a VXLAN or Geneve
VNI, a GRE key, an ERSPAN session) to the cursor's tags: the packet parser
(:mod:`pwcap.capture.packets`) walks the layers, nested to :data:`.codes.MAX_LAYERS`,
and the tags become part of the flow's identity and its ``encapsulation`` label.
"""
