"""PYNQ's ``register_map``: an IP's registers by name, each with its named
bit fields, read and written through the IP's ``MMIO`` (PYNQ builds it from the
design's register description; dmaflow carries the AXI DMA's, from PG021, in
its table of the designs)."""

from __future__ import annotations

from ._native import axi_dma_registers

#: The AXI DMA's register map (PG021), from dmaflow's table of the designs:
#: ``(name, offset, {field: (lsb, width)})`` each.
AXI_DMA = [(name, offset, {f: (lsb, width) for f, lsb, width in fields}) for name, offset, fields in axi_dma_registers()]


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
        lsb, width = fields[field]
        return (int(self) >> lsb) & ((1 << width) - 1)

    def __setattr__(self, field: str, value: int) -> None:
        if field not in self._fields:
            raise AttributeError(f"register {self._name} has no field {field!r} (fields: {', '.join(self._fields) or 'none'})")
        lsb, width = self._fields[field]
        value = int(value)
        if not 0 <= value < (1 << width):
            raise ValueError(f"{self._name}.{field} is {width} bits wide: {value} does not fit")
        mask = ((1 << width) - 1) << lsb
        self._mmio.write(self._offset, (int(self) & ~mask) | (value << lsb))

    @staticmethod
    def _bits(bits) -> tuple[int, int]:
        """``(lsb, width)`` of ``r[i]`` or ``r[hi:lo]``."""
        if isinstance(bits, slice):
            hi, lo = bits.start, bits.stop
            if hi is None or lo is None or hi < lo or not 0 <= lo <= hi < 32:
                raise IndexError(f"bits [{hi}:{lo}] of a 32-bit register (write them high:low)")
            return lo, hi - lo + 1
        if not 0 <= bits < 32:
            raise IndexError(f"bit {bits} of a 32-bit register")
        return bits, 1

    def __getitem__(self, bits) -> int:
        lsb, width = self._bits(bits)
        return (int(self) >> lsb) & ((1 << width) - 1)

    def __setitem__(self, bits, value: int) -> None:
        """Writes bits (``r[0] = 1``, ``r[2:0] = 5``), read-modify-write, as
        PYNQ's ``Register`` does."""
        lsb, width = self._bits(bits)
        value = int(value)
        if not 0 <= value < (1 << width):
            raise ValueError(f"{width} bits of {self._name}: {value} does not fit")
        mask = ((1 << width) - 1) << lsb
        self._mmio.write(self._offset, (int(self) & ~mask) | (value << lsb))

    def __repr__(self) -> str:
        v = int(self)
        if not self._fields:
            return f"Register(value={v})"
        parts = ", ".join(f"{f}={(v >> lsb) & ((1 << w) - 1)}" for f, (lsb, w) in self._fields.items())
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
        return "RegisterMap {\n" + "".join(f"  {n} = {getattr(self, n)!r},\n" for n in self._registers) + "}"
