"""The PYNQ facade: a notebook's DMA cell with only its import line changed."""

import asyncio
import time

import numpy as np
import pytest

from dmaflow import DmaTimeoutError
from dmaflow.pynq import MMIO, Overlay, allocate

from conftest import scaled

DMACR, DMASR, ADDR, LENGTH = 0x00, 0x04, 0x18, 0x28
S2MM = 0x30


def test_the_pynq_dma_tutorial_cell(overlay):
    dma = overlay.axi_dma_0
    input_buffer = allocate(shape=(5,), dtype=np.uint32)
    output_buffer = allocate(shape=(5,), dtype=np.uint32)
    for i in range(5):
        input_buffer[i] = i
    dma.sendchannel.transfer(input_buffer)
    dma.recvchannel.transfer(output_buffer)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert list(output_buffer) == [0, 1, 2, 3, 4]
    assert dma.sendchannel.idle and dma.recvchannel.idle
    assert dma.recvchannel.transferred == 20
    assert dma.sendchannel.error is False and dma.recvchannel.error is False


@pytest.mark.parametrize("memory", ["coherent", "noncoherent"])
def test_sizes_from_one_byte_to_8_mib(memory):
    for design in ["loopback", "loopback-sg"]:
        ol = Overlay(design, memory=memory)
        dma = ol.axi_dma_0
        rng = np.random.default_rng(1)
        for n in [1, 3, 64, 4095, 65536, 1 << 20, 8 << 20]:
            a = allocate(n, dtype="u1")
            b = allocate(n, dtype="u1")
            a[:] = rng.integers(0, 256, n, dtype=np.uint8)
            dma.recvchannel.transfer(b)
            dma.sendchannel.transfer(a)
            dma.sendchannel.wait()
            dma.recvchannel.wait()
            assert dma.recvchannel.transferred == n
            assert np.array_equal(a, b), f"{design} {memory} {n}"
            a.freebuffer()
            b.freebuffer()


def test_start_and_nbytes_pick_part_of_an_array(overlay):
    dma = overlay.axi_dma_0
    a = allocate(100, dtype="u4")
    b = allocate(100, dtype="u4")
    a[:] = np.arange(100)
    b[:] = 0
    dma.recvchannel.transfer(b, start=40, nbytes=80)
    dma.sendchannel.transfer(a, start=8, nbytes=80)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert list(b[10:30]) == list(range(2, 22))
    assert b[9] == 0 and b[30] == 0


def test_wait_async_on_both_channels_at_once(overlay):
    dma = overlay.axi_dma_0
    a = allocate(1 << 16, dtype="u2")
    b = allocate(1 << 16, dtype="u2")
    a[:] = np.arange(1 << 16)

    async def both():
        dma.recvchannel.transfer(b)
        dma.sendchannel.transfer(a)
        await asyncio.gather(dma.sendchannel.wait_async(), dma.recvchannel.wait_async())

    asyncio.run(both())
    assert np.array_equal(a, b)


def test_a_stalled_core_is_a_timeout_and_the_next_transfer_works():
    ol = Overlay("loopback", timeout=0.2)
    dma = ol.axi_dma_0
    a = allocate(4096, dtype="u1")
    b = allocate(4096, dtype="u1")
    a[:] = 1
    # A stall the engine can be halted after (recovery waits up to twice the
    # timeout): the buffers come back.
    ol.board.inject_stall(0.3)
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    with pytest.raises(DmaTimeoutError, match="no completion"):
        dma.sendchannel.wait()
    with pytest.raises((DmaTimeoutError, RuntimeError)):
        dma.recvchannel.wait()
    assert dma.sendchannel.error is True
    assert "no completion" in dma.sendchannel.error_message
    assert not b._native.lost
    a[:] = 2
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (b == 2).all()


def test_a_core_that_cannot_be_halted_keeps_the_buffer_from_python():
    ol = Overlay("loopback", timeout=0.1)
    dma = ol.axi_dma_0
    a = allocate(8192, dtype="u1")
    b = allocate(8192, dtype="u1")
    a[:] = 7
    b[:] = 1
    # Longer than recovery waits (twice the timeout): the engine is lost.
    ol.board.inject_stall(1.5)
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    with pytest.raises(DmaTimeoutError):
        dma.sendchannel.wait()
    with pytest.raises(Exception):
        dma.recvchannel.wait()
    assert b._native.lost and ol.board.lost_bytes > 0
    # The receive buffer's pages are private now: the late write never shows.
    time.sleep(1.6)
    assert (b == 0).all()
    # The engine comes back once the stall is over.
    c = allocate(64, dtype="u1")
    d = allocate(64, dtype="u1")
    c[:] = 5
    dma.recvchannel.start()
    dma.recvchannel.transfer(d)
    dma.sendchannel.transfer(c)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (d == 5).all()


def test_bad_transfers_are_python_errors(overlay):
    dma = overlay.axi_dma_0
    a = allocate((8, 8), dtype="u4")
    with pytest.raises(ValueError, match="contiguous"):
        dma.sendchannel.transfer(a[:, ::2])
    with pytest.raises(TypeError, match="allocate"):
        dma.sendchannel.transfer(np.zeros(8, dtype="u4"))
    with pytest.raises(ValueError, match="not inside"):
        dma.sendchannel.transfer(a, start=200, nbytes=100)
    # As PYNQ's: waiting on an idle channel returns at once.
    dma.sendchannel.wait()
    a.freebuffer()
    with pytest.raises(ValueError, match="closed"):
        dma.sendchannel.transfer(a)
    b = allocate(16, dtype="u1")
    dma.recvchannel.transfer(b)
    with pytest.raises(RuntimeError, match="not idle"):
        dma.recvchannel.transfer(b)
    with pytest.raises(RuntimeError, match="in flight"):
        dma.recvchannel.stop()
    # Too long for the length register of a narrow engine.
    ol = Overlay("loopback", length_width=12)
    big = allocate(8192, dtype="u1")
    with pytest.raises(ValueError, match="length register"):
        ol.axi_dma_0.sendchannel.transfer(big)


def test_mmio_reaches_the_emulated_registers():
    ol = Overlay("loopback")
    base = ol.ip_dict["axi_dma_0"]["phys_addr"]
    assert ol.ip_dict["axi_dma_0"]["parameters"]["c_include_sg"] == "0"
    mmio = MMIO(base, 0x10000)
    # Started when the overlay loaded, as PYNQ's driver starts them: not
    # Halted.
    assert not mmio.read(DMASR) & 1 and not mmio.read(S2MM + DMASR) & 1
    # Register-level driving, as PYNQ's own driver does with read/write only.
    a = allocate(256, dtype="u1")
    b = allocate(256, dtype="u1")
    a[:] = np.arange(256)
    mmio.write(S2MM + DMACR, 1)
    mmio.write(S2MM + ADDR, b.physical_address)
    mmio.write(S2MM + LENGTH, 256)
    mmio.write(DMACR, 1)
    mmio.write(ADDR, a.physical_address)
    mmio.write(LENGTH, 256)
    t0 = time.monotonic()
    while not mmio.read(S2MM + DMASR) & 0x1000:  # IOC_Irq
        assert time.monotonic() - t0 < scaled(2), hex(mmio.read(S2MM + DMASR))
    assert np.array_equal(a, b)
    with pytest.raises(IndexError):  # PYNQ's type for a read past the window
        mmio.read(0x10000)
    with pytest.raises(ValueError):
        MMIO(base + 0x20000, 4)
    with pytest.raises(ValueError):  # PYNQ's type for a float write
        mmio.write(0, 1.5)


def test_transfers_never_waited_for_are_collected_as_pynq_does(overlay):
    # Published tutorials start transfers, let time pass and read the
    # output, or start the next transfer, without calling wait().
    import time

    dma = overlay.axi_dma_0
    a = allocate(1024, dtype="u4")
    b = allocate(1024, dtype="u4")
    for round in range(3):
        a[:] = np.arange(1024, dtype=np.uint32) + round
        dma.recvchannel.transfer(b)
        dma.sendchannel.transfer(a)
        deadline = time.monotonic() + 5.0
        while not (dma.sendchannel.idle and dma.recvchannel.idle):
            assert time.monotonic() < deadline, "the channels never went idle"
            time.sleep(0.001)
        assert (b == a).all()
        assert dma.recvchannel.transferred == 4096
    # The next transfer is accepted without a wait() in between.
    dma.sendchannel.transfer(a)
    dma.recvchannel.transfer(b)
    time.sleep(0.05)
    dma.recvchannel.transfer(b)  # the last one finished: accepted
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (b == a).all()


def test_a_wait_on_one_channel_does_not_hold_up_the_other(overlay):
    # A thread waits on S2MM (the GIL released) while the main thread starts
    # the MM2S transfer that S2MM waits for: it must start at once, not after
    # the other wait has timed out.
    import threading

    dma = overlay.axi_dma_0
    a = allocate(4096, dtype="u1")
    b = allocate(4096, dtype="u1")
    a[:] = 7
    dma.recvchannel.transfer(b)
    result = {}

    def waiter():
        try:
            dma.recvchannel.wait()
            result["ok"] = True
        except Exception as e:  # noqa: BLE001 - reported below
            result["error"] = e

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)  # the waiter is asleep in its wait
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    t.join(10)
    assert result == {"ok": True}, result
    assert (b == 7).all()


def test_writing_a_buffer_the_device_owns_is_defined_as_on_pynq(overlay):
    # PYNQ leaves arrays writable while a transfer owns them, and so does
    # dmaflow: what the device sends is then each byte old or new, nothing
    # else, and the program goes on (the emulated device copies with atomic
    # accesses: no data race in Rust's sense).
    import threading

    dma = overlay.axi_dma_0
    a = allocate(1 << 16, dtype="u1")
    b = allocate(1 << 16, dtype="u1")
    a[:] = 1
    stop = threading.Event()

    def scribble():
        while not stop.is_set():
            a[:] = 2
            a[:] = 1

    t = threading.Thread(target=scribble)
    t.start()
    try:
        for _ in range(20):
            dma.recvchannel.transfer(b)
            dma.sendchannel.transfer(a)
            dma.sendchannel.wait()
            dma.recvchannel.wait()
            assert set(np.unique(b)) <= {1, 2}
    finally:
        stop.set()
        t.join(10)


def test_register_map_reads_and_writes_named_registers_and_fields():
    ol = Overlay("loopback")
    dma = ol.axi_dma_0
    rm = dma.register_map
    a = allocate(64, dtype="u1")
    b = allocate(64, dtype="u1")
    a[:] = np.arange(64)
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    # The DMASR of an engine that finished: running, idle, no error.
    assert rm.MM2S_DMASR.Halted == 0 and rm.MM2S_DMASR.Idle == 1
    assert rm.S2MM_DMASR.DMAIntErr == 0 and rm.S2MM_DMASR[1] == 1
    assert rm.MM2S_DMACR.RS == 1
    assert int(rm.S2MM_LENGTH) == 64
    assert int(rm.MM2S_SA) == a.physical_address
    # A field written alone (read-modify-write), then the whole register.
    rm.MM2S_DMACR.IOC_IrqEn = 0
    assert rm.MM2S_DMACR.IOC_IrqEn == 0 and rm.MM2S_DMACR.RS == 1
    rm.MM2S_DMACR.IOC_IrqEn = 1
    assert rm.MM2S_DMACR[12] == 1 and rm.MM2S_DMACR[23:16] == rm.MM2S_DMACR.IRQThreshold
    with pytest.raises(AttributeError, match="no field 'Nope'"):
        rm.MM2S_DMACR.Nope
    with pytest.raises(AttributeError, match="no register"):
        rm.MM2S_NOPE
    with pytest.raises(ValueError, match="8 bits wide"):
        rm.MM2S_DMACR.IRQThreshold = 256
    assert "RS=1" in repr(rm.MM2S_DMACR)
    # The channels still work after the register writes.
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (b == a).all()


def test_mmio_as_pynq_code_uses_it():
    ol = Overlay("loopback")
    base = ol.ip_dict["axi_dma_0"]["phys_addr"]
    mmio = MMIO(base, 0x100)
    # PYNQ's exception types.
    with pytest.raises(MemoryError, match="Unaligned"):
        mmio.read(2)
    with pytest.raises(MemoryError, match="Unaligned"):
        mmio.write(6, 1)
    with pytest.raises(IndexError):
        mmio.read(0x100)
    with pytest.raises(ValueError, match="negative"):
        mmio.read(-4)
    with pytest.raises(ValueError, match="int or bytes"):
        mmio.write(S2MM + ADDR, 1.5)
    # Words through `array`, narrow and typed reads.
    mmio.write(S2MM + ADDR, 0x4048F5C3)  # the bits of 3.14 as a float32
    assert mmio.array[(S2MM + ADDR) // 4] == 0x4048F5C3
    assert len(mmio.array) == 0x40
    mmio.array[(S2MM + ADDR) // 4] = 0x12345678
    assert mmio.read(S2MM + ADDR) == 0x12345678
    assert mmio.read(S2MM + ADDR, length=1) == 0x78
    assert mmio.read(S2MM + ADDR, length=2) == 0x5678
    assert mmio.read(S2MM + ADDR, dtype=np.uint16) == 0x5678
    mmio.write(S2MM + ADDR, 0x4048F5C3)
    assert abs(mmio.read(S2MM + ADDR, dtype=np.float32) - 3.14) < 1e-6
    assert isinstance(mmio.read(S2MM + ADDR, dtype=float), float)
    a = allocate(16, dtype="u4")
    assert a.virtual_address == a.ctypes.data


def test_the_pynq_lib_dma_path_and_ip_dict_keys(overlay):
    # PYNQ's own form: the driver class from `pynq.lib.dma`, built from the
    # overlay's ip_dict entry alone.
    from dmaflow.pynq.lib.dma import DMA

    entry = overlay.ip_dict["axi_dma_0"]
    for key in ("phys_addr", "addr_range", "parameters", "interrupts", "registers", "device", "mem_id", "bdtype", "gpio"):
        assert key in entry, key
    assert entry["registers"]["S2MM_DMASR"]["fields"]["Idle"] == {
        "bit_offset": 1,
        "bit_width": 1,
        "access": "read-only",
        "description": "Idle",
    }
    dma = DMA(entry)
    assert dma.buffer_max_size == (1 << int(entry["parameters"]["c_sg_length_width"])) - 1
    a = allocate(1000, dtype="u4")
    b = allocate(1000, dtype="u4")
    a[:] = np.arange(1000)
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (b == a).all()


def test_channels_run_from_the_moment_the_overlay_is_loaded(overlay):
    # PYNQ's direct-mode driver starts both channels when the IP is created
    # (notebooks read DMASR or `running` before their first transfer); its
    # scatter-gather driver leaves them halted until a transfer. `running`
    # reads DMASR either way.
    dma = overlay.axi_dma_0
    rm = dma.register_map
    sg = overlay.board.sg
    for name, ch in (("MM2S", dma.sendchannel), ("S2MM", dma.recvchannel)):
        assert getattr(rm, f"{name}_DMASR").Halted == int(sg), name
        assert getattr(rm, f"{name}_DMACR").RS == int(not sg), name
        assert ch.running == (not sg) and ch.idle and ch.error is False
    if sg:
        # start() by hand: CURDESC is set before RS, as PG021 asks, and
        # nothing is fetched.
        dma.sendchannel.start()
        assert rm.MM2S_DMASR.Halted == 0 and dma.sendchannel.running
        assert int(rm.MM2S_CURDESC) != 0 and rm.MM2S_DMASR.SGIncld == 1
    a = allocate(1000, dtype="u1")
    b = allocate(1000, dtype="u1")
    a[:] = np.arange(1000) % 251
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (b == a).all()
    # stop() halts the channel as PYNQ's does; a transfer then is refused
    # until start() in direct mode (PYNQ's scatter-gather driver starts the
    # channel itself).
    dma.sendchannel.stop()
    assert rm.MM2S_DMASR.Halted == 1 and not dma.sendchannel.running
    if not sg:
        with pytest.raises(RuntimeError, match="not started"):
            dma.sendchannel.transfer(a)
    dma.sendchannel.start()
    assert rm.MM2S_DMASR.Halted == 0 and dma.sendchannel.running
    b[:] = 0
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (b == a).all()


def test_pynq_lib_dma_scatter_gather_over_several_descriptors_and_cyclic_mode():
    # PYNQ's scatter-gather driver spreads a transfer longer than
    # buffer_max_size over several descriptors, and sends one buffer for
    # ever in cyclic mode until stop().
    from dmaflow.pynq.lib.dma import DMA

    ol = Overlay("loopback-sg", length_width=12)
    dma = DMA(ol.ip_dict["axi_dma_0"])
    assert dma.buffer_max_size == 4095
    n = 5 * dma.buffer_max_size + 123
    a = allocate(n, dtype="u1")
    b = allocate(n, dtype="u1")
    a[:] = np.arange(n) % 253
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (b == a).all() and dma.recvchannel.transferred == n
    # Cyclic: the same packet arrives again and again (each received into
    # one descriptor).
    ol = Overlay("loopback-sg")
    dma = DMA(ol.ip_dict["axi_dma_0"])
    pkt = allocate(1024, dtype="u4")
    pkt[:] = np.arange(1024, dtype="u4") * 7
    with pytest.raises(RuntimeError, match="only valid in sendchannel"):
        dma.recvchannel.transfer(allocate(64, dtype="u1"), cyclic=True)
    dma.sendchannel.transfer(pkt, cyclic=True)
    with pytest.raises(RuntimeError, match="Cannot wait in cyclic BD mode"):
        dma.sendchannel.wait()
    assert not dma.sendchannel.idle
    for _ in range(5):
        got = allocate(1024, dtype="u4")
        dma.recvchannel.transfer(got)
        dma.recvchannel.wait()
        assert (got == pkt).all()
        got.freebuffer()
    # A buffer in a cyclic transfer is the device's until stop().
    with pytest.raises(RuntimeError, match="in use by a transfer"):
        pkt.freebuffer()
    dma.sendchannel.stop()
    assert not dma.sendchannel.running and dma.sendchannel.idle
    pkt.freebuffer()
    # Started again, the channel sends once more as usual. What the stop
    # left of the last cyclic packet in the stream (the FIFO is the
    # fabric's, not the engine's) arrives first, or ahead in the same packet.
    dma.sendchannel.start()
    c = allocate(64, dtype="u1")
    c[:] = 3
    dma.sendchannel.transfer(c)
    for _ in range(200):
        big = allocate(8192, dtype="u1")
        dma.recvchannel.transfer(big)
        dma.recvchannel.wait()
        k = dma.recvchannel.transferred
        if k >= 64 and (big[k - 64 : k] == 3).all():
            break
    else:
        pytest.fail("the packet sent after the cyclic transfer never arrived")
    dma.sendchannel.wait()


def test_cyclic_mode_needs_scatter_gather():
    ol = Overlay("loopback")
    a = allocate(64, dtype="u1")
    with pytest.raises(RuntimeError, match="scatter-gather"):
        ol.axi_dma_0.sendchannel.transfer(a, cyclic=True)
    # The refusal leaves the channel usable.
    b = allocate(64, dtype="u1")
    a[:] = 1
    ol.axi_dma_0.recvchannel.transfer(b)
    ol.axi_dma_0.sendchannel.transfer(a)
    ol.axi_dma_0.sendchannel.wait()
    ol.axi_dma_0.recvchannel.wait()
    assert (b == 1).all()


def test_overlay_parts_and_pl_reset_as_pynq_code_uses_them():
    from dmaflow.pynq import PL

    ol = Overlay("loopback", timeout=scaled(0.2))
    assert ol.is_loaded() and ol.bitfile_name == "loopback.bit"
    assert PL.bitfile_name == "loopback.bit" and PL.ip_dict is ol.ip_dict
    pins = ol.interrupt_pins
    assert set(pins) == {"axi_dma_0/mm2s_introut", "axi_dma_0/s2mm_introut"}
    assert pins["axi_dma_0/s2mm_introut"]["index"] == 1
    assert pins["axi_dma_0/s2mm_introut"]["controller"] in ol.interrupt_controllers
    assert ol.hierarchy_dict == {} and ol.gpio_dict == {} and ol.clock_dict == {}
    assert ol.device.board is ol.board
    # A buffer allocated before a reset stays valid across it.
    a = allocate(256, dtype="u1")
    a[:] = 4
    # Registers changed by hand and a receive left in flight ...
    dma = ol.axi_dma_0
    dma.sendchannel.stop()
    assert dma.register_map.MM2S_DMASR.Halted == 1
    b = allocate(256, dtype="u1")
    dma.recvchannel.transfer(b)
    # ... PL.reset() returns the fabric to its power-on state, with new
    # driver objects whose direct-mode channels are started, as on PYNQ.
    PL.reset()
    new = ol.axi_dma_0
    assert new is not dma
    assert new.sendchannel.running and new.recvchannel.running
    assert int(new.register_map.S2MM_LENGTH) == 0
    # The old object's transfer ends in its wait (a timeout: the engine was
    # reset under it) and its buffer is handed back.
    with pytest.raises(DmaTimeoutError):
        dma.recvchannel.wait()
    b.freebuffer()
    c = allocate(256, dtype="u1")
    new.recvchannel.transfer(c)
    new.sendchannel.transfer(a)
    new.sendchannel.wait()
    new.recvchannel.wait()
    assert (c == 4).all()
    # download() does the same and makes the overlay the loaded one again;
    # free() gives it up.
    ol.free()
    assert not ol.is_loaded() and PL.bitfile_name is None and PL.ip_dict == {}
    ol.download()
    assert ol.is_loaded() and ol.axi_dma_0.sendchannel.running
    ol.axi_dma_0.recvchannel.transfer(c)
    ol.axi_dma_0.sendchannel.transfer(a)
    ol.axi_dma_0.sendchannel.wait()
    ol.axi_dma_0.recvchannel.wait()
    assert (c == 4).all()


def test_what_pynqs_own_pages_do_that_an_outside_run_found_missing():
    from dmaflow.pynq import DefaultHierarchy, DefaultIP, Interrupt

    # A buffer from an earlier load (a notebook's Overlay cell run twice)
    # is another board's memory: refused, never read from another buffer.
    Overlay("loopback")
    old = allocate((4,), np.uint32)
    old[:] = [1, 2, 3, 4]
    ol = Overlay("loopback")
    dma = ol.axi_dma_0
    with pytest.raises(ValueError, match="another board's memory"):
        dma.sendchannel.transfer(old)
    out = allocate((4,), np.uint32)
    with pytest.raises(ValueError, match="another board's memory"):
        Overlay("loopback").axi_dma_0.recvchannel.transfer(out)

    # PYNQ's custom-driver template: DefaultIP(description), bound by type.
    class Adder(DefaultIP):
        bindto = ["xilinx.com:ip:axi_dma:7.1"]

        def __init__(self, description):
            super().__init__(description)

        def status(self):
            return self.read(0x04)

    try:
        ol = Overlay("loopback")
        assert isinstance(ol.axi_dma_0, Adder)
        assert ol.axi_dma_0.status() == ol.axi_dma_0.mmio.read(0x04)
        assert ol.axi_dma_0.mmio.device is ol.device
    finally:
        from dmaflow.pynq import _bound

        _bound.pop("xilinx.com:ip:axi_dma:7.1", None)
    ol = Overlay("loopback-sg")
    dma = ol.axi_dma_0
    # Bits of a register written by index and slice (register_map_intro).
    dma.register_map.MM2S_SA[2:0] = 5
    dma.register_map.MM2S_SA[4] = 1
    assert int(dma.register_map.MM2S_SA) & 0x1F == 0x15
    with pytest.raises(ValueError, match="Slicing range cannot represent value 4"):
        dma.register_map.MM2S_SA[1:0] = 4
    # Scatter-gather: a transfer after stop() starts the channel, as PYNQ's
    # driver does.
    a = allocate(64, dtype="u1")
    b = allocate(64, dtype="u1")
    a[:] = 6
    dma.sendchannel.stop()
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (b == 6).all()
    # MMIO: PYNQ's word orders only; `device`.
    mmio = MMIO(ol.ip_dict["axi_dma_0"]["phys_addr"], 0x100)
    with pytest.raises(ValueError, match="big and little endian"):
        mmio.read(4, 8, "middle")
    assert mmio.device is ol.device
    # What has no meaning here says so.
    with pytest.raises(NotImplementedError, match="flat"):
        DefaultHierarchy({})
    with pytest.raises(NotImplementedError, match="wait"):
        Interrupt("axi_dma_0/mm2s_introut")


def test_each_emulated_design_is_what_the_designs_table_says():
    # ip_dict, the running board's register windows and the engines' own
    # registers all agree with the library's table of the designs.
    from dmaflow._native import design_ips
    from dmaflow.pynq import EMULATED_DESIGNS

    assert set(EMULATED_DESIGNS) >= {"loopback", "loopback-sg", "fir", "bgsub"}
    for name in EMULATED_DESIGNS:
        ol = Overlay(name, length_width=20)
        ips = design_ips(name, 20)
        windows = {w: (phys, size) for w, phys, size in ol.board.windows}
        for ip in ips:
            entry = ol.ip_dict[ip["name"]]
            assert entry["type"] == ip["type"], (name, ip["name"])
            if ip["phys_addr"] is not None:
                assert windows[ip["name"]] == (ip["phys_addr"], ip["addr_range"])
                assert (entry["phys_addr"], entry["addr_range"]) == windows[ip["name"]]
            params = dict(ip["parameters"])
            for key, value in params.items():
                assert entry["parameters"][key] == entry["parameters"][key.lower()] == value
            if ip["type"].startswith("xilinx.com:ip:axi_dma"):
                # The engine at the table's address says what the table says.
                sr = getattr(ol, ip["name"]).register_map.MM2S_DMASR
                assert sr.SGIncld == int(params["C_INCLUDE_SG"]), (name, ip["name"])
                assert params["C_SG_LENGTH_WIDTH"] == "20"
                pins = {pin: (ctl, line) for pin, ctl, line in ip["interrupts"]}
                assert {p: (i["controller"], i["index"]) for p, i in entry["interrupts"].items()} == pins
        # Every window of the board is an IP of the table.
        assert set(windows) <= {ip["name"] for ip in ips}
    with pytest.raises(ValueError, match="no design called"):
        design_ips("nope", 26)


def test_a_short_direct_mode_transfer_is_there_on_the_next_line():
    # On a board a few hundred bytes move in microseconds, so a cell that
    # reads the output right after recvchannel.transfer(...) without wait()
    # sees the data. Between cells the emulated device thread sleeps: the
    # transfer must not wait for the host to schedule it again.
    ol = Overlay("loopback")
    dma = ol.axi_dma_0
    inp = allocate(shape=(100,), dtype=np.uint32)
    out = allocate(shape=(100,), dtype=np.uint32)
    for i in range(20):
        inp[:] = np.arange(100, dtype=np.uint32) * 3 + i
        out[:] = 0
        time.sleep(0.005)  # the think time between cells: the device sleeps
        dma.sendchannel.transfer(inp)
        dma.recvchannel.transfer(out)
        assert (out == inp).all(), f"round {i}: the data was not there yet"
        dma.sendchannel.wait()
        dma.recvchannel.wait()
        assert dma.recvchannel.transferred == 400


def test_register_map_fields_are_named_as_pynq_reads_them_from_a_hwh(overlay):
    # Vivado's register description of the AXI DMA (what PYNQ's
    # register_map is built from, out of the .hwh) names a field in every
    # register: notebooks read `MM2S_SA.Source_Address`, `S2MM_LENGTH.Length`.
    dma = overlay.axi_dma_0
    rm = dma.register_map
    a = allocate(300, dtype="u1")
    b = allocate(300, dtype="u1")
    a[:] = np.arange(300) % 256
    dma.recvchannel.transfer(b)
    dma.sendchannel.transfer(a)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (b == a).all()
    if not overlay.board.sg:
        assert rm.MM2S_SA.Source_Address == a.physical_address & 0xFFFFFFFF
        assert rm.MM2S_SA_MSB.Source_Address == a.physical_address >> 32
        assert rm.S2MM_DA.Destination_Address == b.physical_address & 0xFFFFFFFF
        assert rm.S2MM_DA_MSB.Destination_Address == b.physical_address >> 32
        assert rm.S2MM_LENGTH.Length == 300 and rm.MM2S_LENGTH.Length == 300
    else:
        cur = int(rm.S2MM_CURDESC)
        assert rm.S2MM_CURDESC.Current_Descriptor_Pointer == cur >> 6 and cur
        assert rm.S2MM_TAILDESC.Tail_Descriptor_Pointer == int(rm.S2MM_TAILDESC) >> 6
        assert rm.S2MM_CURDESC_MSB.Current_Descriptor_Pointer == int(rm.S2MM_CURDESC_MSB)
        assert rm.MM2S_TAILDESC_MSB.Tail_Descriptor_Pointer == int(rm.MM2S_TAILDESC_MSB)
    assert rm.SG_CTL.SG_CACHE == int(rm.SG_CTL) & 0xF and rm.SG_CTL.SG_USER == (int(rm.SG_CTL) >> 8) & 0xF
    regs = overlay.ip_dict["axi_dma_0"]["registers"]
    assert regs["MM2S_SA"]["fields"]["Source_Address"]["bit_width"] == 32
    assert regs["S2MM_LENGTH"]["fields"]["Length"]["bit_width"] == 26
    assert regs["MM2S_CURDESC"]["fields"]["Current_Descriptor_Pointer"]["bit_offset"] == 6
    assert set(regs["SG_CTL"]["fields"]) == {"SG_CACHE", "SG_USER"}
    assert all(r["fields"] for r in regs.values())
    # Status bits are the IP's: PYNQ gives a read-only field no setter. The
    # interrupt bits are written (1 clears them).
    with pytest.raises(AttributeError, match="has no setter"):
        rm.S2MM_DMASR.Idle = 0
    rm.S2MM_DMASR.IOC_Irq = 1
    assert rm.S2MM_DMASR.IOC_Irq == 0
    # PYNQ's Register: str() in hex, r[:] the whole word, r[lo:hi] reversed,
    # its messages for values that do not fit.
    assert str(rm.S2MM_DMASR) == hex(int(rm.S2MM_DMASR))
    assert rm.MM2S_DMACR[:] == int(rm.MM2S_DMACR)
    assert rm.MM2S_DMACR[16:23] == int(f"{rm.MM2S_DMACR.IRQThreshold:08b}"[::-1], 2)
    with pytest.raises(ValueError, match="either 0 or 1"):
        rm.MM2S_DMACR.RS = 2
    with pytest.raises(ValueError, match="Slicing endpoint 32"):
        rm.MM2S_DMACR[32:0]
    text = repr(rm)
    assert text.startswith("RegisterMap {\n  MM2S_DMACR = Register(RS=")
    assert "MM2S_SA = Register(Source_Address=" in text and text.endswith("\n}")


def test_timestamps_and_pynq_device_as_pynq_sets_them():
    import re
    import time as _time

    from dmaflow.pynq import PL, Device

    # PYNQ stamps a download: year/month/day hour:minute:second +microsecond,
    # on the overlay, its device and PL.
    stamp = re.compile(r"^\d{4}/\d{1,2}/\d{1,2} \d{1,2}:\d{1,2}:\d{1,2} \+\d{1,6}$")
    ol = Overlay("loopback")
    assert stamp.match(ol.timestamp), ol.timestamp
    assert PL.timestamp == ol.timestamp == ol.device.timestamp
    # Device: the active device is the one the overlay was loaded on.
    assert Device.active_device is ol.device
    assert ol.device in Device.devices and ol.device.board is ol.board
    assert Device.active_device.bitfile_name == "loopback.bit"
    assert Device.active_device.ip_dict is ol.ip_dict
    assert ol.ip_dict["axi_dma_0"]["device"] is ol.device
    assert Device.active_device.has_capability("REGISTER_RW")
    # A download stamps again; a second overlay takes PL's timestamp over.
    first = ol.timestamp
    _time.sleep(0.002)
    ol.download()
    assert ol.timestamp != first and PL.timestamp == ol.timestamp
    other = Overlay("loopback-sg")
    assert PL.timestamp == other.timestamp != ol.timestamp
    assert Device.active_device.bitfile_name == "loopback-sg.bit"
    # allocate(target=Device) and MMIO(device=Device), as PYNQ code writes.
    buf = allocate((8,), np.uint32, target=Device.active_device)
    buf2 = Device.active_device.allocate((8,), np.uint32)
    dma = other.axi_dma_0
    buf[:] = np.arange(8)
    dma.recvchannel.transfer(buf2)
    dma.sendchannel.transfer(buf)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (buf2 == buf).all()
    mmio = MMIO(other.ip_dict["axi_dma_0"]["phys_addr"], 0x100, device=Device.active_device)
    assert mmio.device is Device.active_device and mmio.read(0x04) & 0x8  # SGIncld
    with pytest.raises(TypeError, match="must be a Device"):
        Device.active_device = "board"
    # PYNQ's `Overlay(..., device=...)`: the device the design runs on.
    again = Overlay("loopback", device=Device.devices[0])
    assert again.device is Device.devices[0] is Device.active_device
    with pytest.raises(ValueError, match="runs on"):
        Overlay("loopback", device=Device("other", "another board"))


def test_mmio_misuse_raises_what_pynq_raises():
    import warnings

    ol = Overlay("loopback")
    base = ol.ip_dict["axi_dma_0"]["phys_addr"]
    mmio = MMIO(base, 0x100)
    # PYNQ's exception types and messages, word for word.
    with pytest.raises(IndexError, match=r"^index 64 is out of bounds for axis 0 with size 64$"):
        mmio.read(0x100)
    with pytest.raises(IndexError, match=r"^index 64 is out of bounds"):
        mmio.read(0xFC, 8)  # the second word is past the window
    with pytest.raises(IndexError, match=r"^index 65 is out of bounds"):
        mmio.write(0x104, 1)
    with pytest.raises(IndexError, match=r"^index 64 is out of bounds"):
        mmio.write(0xF8, b"\0" * 12)
    assert mmio.read(0xF8) == 0  # nothing of the refused write landed
    with pytest.raises(MemoryError, match=r"^Unaligned read: offset must be multiple of 4\.$"):
        mmio.read(2)
    with pytest.raises(MemoryError, match=r"^Unaligned write: offset must be multiple of 4\.$"):
        mmio.write(6, 1)
    with pytest.raises(MemoryError, match=r"^Unaligned write: data length must be multiple of 4\.$"):
        mmio.write(0x18, b"abc")
    with pytest.raises(ValueError, match=r"^Offset cannot be negative\.$"):
        mmio.read(-4)
    with pytest.raises(ValueError, match=r"^MMIO currently only supports 1, 2, 4 and 8-byte reads\.$"):
        mmio.read(0, 3)
    # PYNQ checks the type exactly: int or bytes, nothing else.
    for bad in (1.5, np.uint32(5), True, bytearray(4), "1"):
        with pytest.raises(ValueError, match=r"^Data type must be int or bytes\.$"):
            mmio.write(0x18, bad)
    # The word order matters (and is checked) only for 8-byte reads.
    assert mmio.read(0x18, 4, "middle") == mmio.read(0x18)
    with pytest.raises(ValueError, match=r"^MMIO only supports big and little endian\.$"):
        mmio.read(0x18, 8, "middle")
    with pytest.raises(ValueError, match=r"^Base address or length cannot be negative\.$"):
        MMIO(base, -4)
    # PYNQ's third argument is the device; `debug` is a deprecated keyword.
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = MMIO(base, 0x100, ol.device, debug=True)
    assert [str(x.message) for x in w if issubclass(x.category, DeprecationWarning)] == [
        "Keyword debug has been deprecated."
    ]
    assert m.read(0x04) == mmio.read(0x04)


def test_buffer_close_is_pynqs_deprecated_no_op():
    # PYNQ's PynqBuffer.close() frees nothing and warns; freebuffer() frees.
    Overlay("loopback")
    a = allocate(16, dtype="u1")
    with pytest.warns(DeprecationWarning, match="use scopes to manage buffers"):
        a.close()
    assert not a._native.closed
    a[:] = 3
    assert (a == 3).all()
    a.freebuffer()
    assert a._native.closed


def test_pynqs_old_dma_driver_form_is_refused_as_pynq_refuses_it():
    # PYNQ 2.x's `DMA(address, direction)`: PYNQ 4.0 says where it went.
    from dmaflow.pynq.lib.dma import DMA

    ol = Overlay("loopback")
    entry = ol.ip_dict["axi_dma_0"]
    for args in [(entry["phys_addr"], 0), (entry, 0)]:
        with pytest.raises(RuntimeError, match="old DMA driver which has been deprecated"):
            DMA(*args)
    with pytest.raises(RuntimeError, match="Device not specified in description"):
        DMA({k: v for k, v in entry.items() if k != "device"})
