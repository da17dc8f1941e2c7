"""PYNQ's ``register_map``: an IP's registers by name, each with its named
bit fields, read and written through the IP's ``MMIO`` (PYNQ builds it from the
design's register description; dmaflow carries the AXI DMA's, from PG021, in
its table of the designs)."""

from __future__ import annotations

from ._native import axi_dma_registers

#: The AXI DMA's register map (PG021), from dmaflow's table of the designs:
#: ``(name, offset, {field: (lsb, width, access)})`` each, the fields as
#: Vivado's register description names them (what PYNQ's ``register_map``
#: reads from a ``.hwh``), ``access`` ``"read-write"`` or ``"read-only"``.
AXI_DMA = [
    (name, offset, {f: (lsb, width, access) for f, lsb, width, access in fields})
    for name, offset, fields in axi_dma_registers()
]


class Register:
    """One register: ``int(r)`` reads it, ``r.FIELD`` reads a field,
    ``r.FIELD = v`` writes that field (read-modify-write), ``r[i]`` and
    ``r[hi:lo]`` read and write bits as PYNQ's ``Register`` does."""

    def __init__(self, mmio, name: str, offset: int, fields: dict) -> None:
        object.__setattr__(self, "_mmio", mmio)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_offset", offset)
        object.__setattr__(self, "_fields", fields)

    def __int__(self) -> int:
        return self._mmio.read(self._offset)

    def __index__(self) -> int:
        return int(self)

    def __eq__(self, other) -> bool:
        return int(self) == int(other)

    def __hash__(self) -> int:
        return hash((self._name, self._offset))

    def __getattr__(self, field: str) -> int:
        fields = object.__getattribute__(self, "_fields")
        if field not in fields:
            raise AttributeError(f"register {self._name} has no field {field!r} (fields: {', '.join(fields) or 'none'})")
        lsb, width, _ = fields[field]
        return (int(self) >> lsb) & ((1 << width) - 1)

    def __setattr__(self, field: str, value: int) -> None:
        if field not in self._fields:
            raise AttributeError(f"register {self._name} has no field {field!r} (fields: {', '.join(self._fields) or 'none'})")
        lsb, width, access = self._fields[field]
        if access == "read-only":
            # PYNQ makes a read-only field a property without a setter.
            raise AttributeError(f"property {field!r} of 'Register{self._name}' object has no setter")
        self._set_bits(lsb, width, int(value), f"{self._name}.{field} is {width} bits wide")

    def _set_bits(self, lsb: int, width: int, value: int, what: str) -> None:
        """Writes ``value`` to ``width`` bits from ``lsb`` (read-modify-write),
        refused with PYNQ's messages when it does not fit."""
        if width == 1 and value not in (0, 1):
            raise ValueError(f"Value to be set should be either 0 or 1. ({what})")
        if not 0 <= value < (1 << width):
            raise ValueError(f"Slicing range cannot represent value {value} ({what})")
        mask = ((1 << width) - 1) << lsb
        self._mmio.write(self._offset, (int(self) & ~mask) | (value << lsb))

    @staticmethod
    def _bits(bits) -> tuple[int, int, bool]:
        """``(lsb, width, reversed)`` of ``r[i]`` or ``r[a:b]``, as PYNQ's
        ``Register`` reads an index: both ends included, ``r[hi:lo]`` the
        bits in order, ``r[lo:hi]`` (``lo < hi``) the same bits reversed,
        ``r[:]`` the whole register."""
        if isinstance(bits, int):
            if bits not in range(32):
                raise ValueError(f"Bit {bits} not in range 0 - 31")
            return bits, 1, False
        if not isinstance(bits, slice):
            raise ValueError("Index must be int or slice.")
        start, stop, step = bits.start, bits.stop, bits.step
        if step is None or step == -1:
            start = 31 if start is None else start
            stop = 0 if stop is None else stop
        elif step == 1:
            start = 0 if start is None else start
            stop = 31 if stop is None else stop
        else:
            raise ValueError("Slicing step is not valid.")
        for end in (start, stop):
            if end not in range(32):
                raise ValueError(f"Slicing endpoint {end} not in range 0 - 31")
        if start >= stop:
            return stop, start - stop + 1, False
        return start, stop - start + 1, True

    @staticmethod
    def _reverse(value: int, width: int) -> int:
        return int(f"{value:0{width}b}"[::-1], 2)

    def __getitem__(self, bits) -> int:
        lsb, width, rev = self._bits(bits)
        value = (int(self) >> lsb) & ((1 << width) - 1)
        return self._reverse(value, width) if rev else value

    def __setitem__(self, bits, value: int) -> None:
        """Writes bits (``r[0] = 1``, ``r[2:0] = 5``), read-modify-write, as
        PYNQ's ``Register`` does."""
        lsb, width, rev = self._bits(bits)
        value = int(value)
        what = f"bits [{lsb + width - 1}:{lsb}] of {self._name}"
        if rev and 0 <= value < (1 << width):
            value = self._reverse(value, width)
        self._set_bits(lsb, width, value, what)

    def __str__(self) -> str:
        return hex(int(self))

    def __repr__(self) -> str:
        v = int(self)
        if not self._fields:
            return f"Register(value={v})"
        parts = ", ".join(f"{f}={(v >> lsb) & ((1 << w) - 1)}" for f, (lsb, w, _) in self._fields.items())
        return f"Register({parts})"


class RegisterMap:
    """An IP's registers by name (``register_map.MM2S_DMASR``); assigning an
    ``int`` to one writes the whole register."""

    def __init__(self, mmio, description: list[tuple[str, int, dict]]) -> None:
        object.__setattr__(self, "_mmio", mmio)
        object.__setattr__(self, "_registers", {n: (o, f) for n, o, f in description})

    def __getattr__(self, name: str) -> Register:
        regs = object.__getattribute__(self, "_registers")
        if name not in regs:
            raise AttributeError(f"no register {name!r} (registers: {', '.join(regs)})")
        offset, fields = regs[name]
        return Register(self._mmio, name, offset, fields)

    def __setattr__(self, name: str, value: int) -> None:
        if name not in self._registers:
            raise AttributeError(f"no register {name!r} (registers: {', '.join(self._registers)})")
        self._mmio.write(self._registers[name][0], int(value))

    def __dir__(self):
        return list(self._registers)

    def __repr__(self) -> str:
        order = sorted(self._registers, key=lambda n: self._registers[n][0])
        return "RegisterMap {\n" + ",\n".join(f"  {n} = {getattr(self, n)!r}" for n in order) + "\n}"
