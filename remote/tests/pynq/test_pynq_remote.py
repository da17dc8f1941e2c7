"""PYNQ 4.0 from PyPI, unmodified, drives `dmaflow serve`'s emulated board
over PYNQ.remote: each test starts a server on a loopback address of its own
(PYNQ's client always connects to port 7967 of the address in
PYNQ_REMOTE_DEVICES, so tests differ by address, not port) and runs PYNQ
code in a fresh interpreter (PYNQ picks its device once per process).

Run by scripts/pynq-remote-test.sh (which installs PYNQ 4.0 into
target/pynq-venv and builds the tool)."""

import os
import random
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import handmade  # noqa: E402

try:
    import pynq  # noqa: F401

    HAVE_PYNQ = True
except Exception:  # pragma: no cover - depends on the interpreter
    HAVE_PYNQ = False

pytestmark = pytest.mark.skipif(
    not HAVE_PYNQ,
    reason="PYNQ 4.0 is not installed in this interpreter: "
    "run scripts/pynq-remote-test.sh (it installs it into target/pynq-venv)",
)

ROOT = Path(__file__).resolve().parents[3]
DMAFLOW = Path(os.environ.get("DMAFLOW_BIN", ROOT / "target" / "release" / "dmaflow"))
# Longest a PYNQ script or a server start may take.
TIMEOUT = 120


class Served:
    """A `dmaflow serve` process on a loopback address of its own."""

    def __init__(self, *args):
        if not DMAFLOW.exists():
            pytest.fail(f"{DMAFLOW} is missing: build it (cargo build --release)")
        for _ in range(20):
            self.ip = "127.%d.%d.%d" % (
                random.randint(1, 254),
                random.randint(1, 254),
                random.randint(2, 254),
            )
            self.proc = subprocess.Popen(
                [str(DMAFLOW), "serve", "--listen", f"{self.ip}:7967", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            first = self.proc.stdout.readline()
            if "PYNQ.remote on" in first:
                self.banner = first
                return
            self.proc.wait(timeout=TIMEOUT)
            rest = self.proc.stdout.read()
            if "in use" not in first + rest:
                pytest.fail(f"dmaflow serve did not start: {first}{rest}")
        pytest.fail("no free loopback address for dmaflow serve")

    def run(self, code, expect_ok=True):
        """Runs PYNQ `code` in a fresh interpreter against this server;
        returns its stdout."""
        env = dict(os.environ, PYNQ_REMOTE_DEVICES=self.ip)
        r = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        if expect_ok:
            assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        return r

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        assert self.proc.returncode is not None


@pytest.fixture
def served(request):
    servers = []

    def start(*args):
        s = Served(*args)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def overlays(tmp_path):
    """`dmaflow overlay export` of the loopback designs into tmp_path."""
    for d in ("loopback", "loopback-sg"):
        subprocess.run(
            [str(DMAFLOW), "overlay", "export", d, str(tmp_path)],
            check=True,
            timeout=TIMEOUT,
            capture_output=True,
        )
    return tmp_path


# PYNQ's documented DMA cell (pynq.readthedocs.io, "DMA"), with the data
# checked; the send/receive of a larger random buffer after it.
DMA_CELL = """
import numpy as np
from pynq import Overlay, allocate

ol = Overlay({bit!r})
dma = ol.axi_dma_0
input_buffer = allocate(shape=(5,), dtype=np.uint32)
output_buffer = allocate(shape=(5,), dtype=np.uint32)
for i in range(5):
    input_buffer[i] = i
dma.sendchannel.transfer(input_buffer)
dma.recvchannel.transfer(output_buffer)
{wait}
assert list(output_buffer) == [0, 1, 2, 3, 4], output_buffer

rng = np.random.default_rng(7)
data = rng.integers(0, 2**32, size=16384, dtype=np.uint32)
tx = allocate(shape=data.shape, dtype=np.uint32)
rx = allocate(shape=data.shape, dtype=np.uint32)
tx[:] = data
dma.sendchannel.transfer(tx)
dma.recvchannel.transfer(rx)
{wait}
assert (np.asarray(rx) == data).all()
print("SG", int(ol.ip_dict["axi_dma_0"]["parameters"]["c_include_sg"]), type(dma.sendchannel).__name__)
"""

WAIT = """
dma.sendchannel.wait()
dma.recvchannel.wait()
"""

# PYNQ 4.0's scatter-gather driver cannot complete a transfer over
# PYNQ.remote as released, whatever serves it (pynq-cpp on a board
# included), for two faults of its client: (1) its RemoteBuffer is a local
# numpy array made with np.ndarray.__new__, uninitialised, and the driver
# fills only some words of each descriptor before flush() sends the whole
# local copy, so the status word the device reads is whatever the heap held
# (PG021's engine then reports SGIntErr for a descriptor marked complete, or
# the driver raises "DMA Error in descriptor" reading its own copy); (2)
# wait() ends with `self._descr.close()`, which RemoteBuffer lacks
# (AttributeError). These two lines, and nothing else, change PYNQ for the
# scatter-gather tests: buffers start zeroed, as PYNQ's local ones do, and
# close() is freebuffer(), as on PynqBuffer.
SG_FIX = """
import numpy as np
from pynq.pl_server.remote_device import RemoteBuffer, RemoteDevice
_allocate = RemoteDevice.allocate
RemoteDevice.allocate = lambda self, *a, **k: _zeroed(_allocate(self, *a, **k))
def _zeroed(b):
    np.ndarray.fill(b, 0)
    return b
RemoteBuffer.close = RemoteBuffer.freebuffer
"""


def test_documented_dma_cell_direct(served, overlays):
    s = served()
    out = s.run(DMA_CELL.format(bit=str(overlays / "loopback.bit"), wait=WAIT)).stdout
    assert "SG 0 _SDMAChannel" in out


def test_documented_dma_cell_scatter_gather(served, overlays):
    s = served()
    out = s.run(
        SG_FIX + DMA_CELL.format(bit=str(overlays / "loopback-sg.bit"), wait=WAIT)
    ).stdout
    assert "SG 1 _SGDMAChannel" in out


def test_register_map_reads_the_engine(served, overlays):
    s = served()
    out = s.run(
        f"""
        import numpy as np
        from pynq import Overlay, allocate
        ol = Overlay({str(overlays / "loopback.bit")!r})
        dma = ol.axi_dma_0
        rm = dma.register_map
        # PYNQ's direct driver starts both channels when it is made.
        assert int(rm.MM2S_DMACR.RS) == 1 and int(rm.S2MM_DMACR.RS) == 1
        assert int(rm.MM2S_DMASR.Halted) == 0 and int(rm.MM2S_DMASR.SGIncld) == 0
        a = allocate(shape=(256,), dtype=np.uint8)
        b = allocate(shape=(256,), dtype=np.uint8)
        a[:] = np.arange(256, dtype=np.uint8)
        dma.sendchannel.transfer(a)
        dma.recvchannel.transfer(b)
        dma.sendchannel.wait(); dma.recvchannel.wait()
        assert int(rm.S2MM_LENGTH.Length) == 256, rm.S2MM_LENGTH
        assert int(rm.S2MM_DA.Destination_Address) == b.physical_address
        assert int(rm.MM2S_SA.Source_Address) == a.physical_address
        assert int(rm.MM2S_DMASR.Idle) == 1
        print("ok")
        """
    ).stdout
    assert "ok" in out


def test_mmio_reads_and_writes(served, overlays):
    s = served()
    out = s.run(
        f"""
        from pynq import Overlay, MMIO
        ol = Overlay({str(overlays / "loopback-sg.bit")!r})
        base = ol.ip_dict["axi_dma_0"]["phys_addr"]
        m = MMIO(base, 0x10000)
        # MM2S_CURDESC is writable while the channel is halted.
        m.write(0x08, 0x10000040)
        assert m.read(0x08) == 0x10000040, hex(m.read(0x08))
        assert m.read(0x04) & 0x9 == 0x9  # Halted, SGIncld
        m.write(0x00, 0x4)  # soft reset
        assert m.read(0x08) == 0
        try:
            MMIO(0x8000_0000, 0x1000)
        except RuntimeError as e:
            assert "outside every IP" in str(e), e
        else:
            raise AssertionError("MMIO outside every IP was accepted")
        print("ok")
        """
    ).stdout
    assert "ok" in out


def test_freebuffer_in_a_loop_of_200(served, overlays):
    # 200 buffers of 2 MiB: 400 MiB, beyond the emulated board's 256 MiB of
    # DMA memory unless each freebuffer() gives its memory back.
    s = served()
    out = s.run(
        f"""
        import numpy as np
        from pynq import Overlay, allocate
        ol = Overlay({str(overlays / "loopback.bit")!r})
        dma = ol.axi_dma_0
        for i in range(200):
            buf = allocate(shape=(2 << 20,), dtype=np.uint8)
            if i % 50 == 0:
                out = allocate(shape=(4096,), dtype=np.uint8)
                buf[:] = i % 256
                dma.sendchannel.transfer(buf, nbytes=4096)
                dma.recvchannel.transfer(out)
                dma.sendchannel.wait(); dma.recvchannel.wait()
                assert (np.asarray(out) == i % 256).all()
                out.freebuffer()
            buf.freebuffer()
        print("ok")
        """
    ).stdout
    assert "ok" in out


def test_changed_bitstream_under_the_same_name_is_loaded(served, overlays, tmp_path):
    # PYNQ sends /lib/firmware/NAME.bin only when it is missing there: the
    # server forgets it when the attributes are set, so a changed design
    # under the same name is loaded.
    s = served()
    d = tmp_path / "same"
    d.mkdir()
    code = f"""
        from pynq import Overlay
        ol = Overlay({str(d / "x.bit")!r})
        print("SGIncld", int(ol.axi_dma_0.register_map.MM2S_DMASR.SGIncld))
        """
    for design, sg in (("loopback", 0), ("loopback-sg", 1)):
        for ext in ("bit", "hwh"):
            shutil.copy(overlays / f"{design}.{ext}", d / f"x.{ext}")
        assert f"SGIncld {sg}" in s.run(code).stdout


def test_users_design_from_a_handmade_hwh(served, tmp_path):
    # A .hwh/.bit pair written here, not by dmaflow's exporter: a direct-mode
    # DMA at 0xA0010000 with a 23-bit length register and 64-bit data.
    hwh = tmp_path / "mine.hwh"
    hwh.write_text(
        handmade.hwh(
            "mine",
            [("axi_dma_0", 0xA0010000, False, 23, 64)],
            customs=[("scaler_0", 0xA0000000)],
        )
    )
    (tmp_path / "mine.bit").write_bytes(handmade.bit("mine"))
    s = served("--hwh", str(hwh))
    assert "mine" in s.banner
    # The IP the emulator does not model is said at start.
    said = []
    while not said or not said[-1].startswith("  PYNQ:"):  # the banner's last line
        said.append(s.proc.stdout.readline())
        assert said[-1] and len(said) < 20, said
    assert any("scaler_0" in line and "plain memory" in line for line in said), said
    out = s.run(
        DMA_CELL.format(bit=str(tmp_path / "mine.bit"), wait=WAIT)
        + """
assert ol.ip_dict["axi_dma_0"]["phys_addr"] == 0xA0010000
assert dma.buffer_max_size == (1 << 23) - 1, dma.buffer_max_size
# The user's own IP: its registers are plain memory, what is written reads back.
from pynq import MMIO
MMIO(0xA0000000, 0x10000).write(0x10, 0x1234)
assert MMIO(0xA0000000, 0x10000).read(0x10) == 0x1234
"""
    ).stdout
    assert "SG 0 _SDMAChannel" in out


def test_users_scatter_gather_design(served, tmp_path):
    hwh = tmp_path / "mine_sg.hwh"
    hwh.write_text(handmade.hwh("mine_sg", [("axi_dma_0", 0xA0000000, True, 26, 32)]))
    (tmp_path / "mine_sg.bit").write_bytes(handmade.bit("mine_sg"))
    s = served("--hwh", str(hwh))
    out = s.run(SG_FIX + DMA_CELL.format(bit=str(tmp_path / "mine_sg.bit"), wait=WAIT)).stdout
    assert "SG 1 _SGDMAChannel" in out


def test_users_design_with_a_direct_and_a_scatter_gather_dma(served, tmp_path):
    # Two AXI DMAs in one handmade design: PYNQ binds its direct driver to
    # the first and its scatter-gather driver to the second, and both loop
    # their data back.
    hwh = tmp_path / "two.hwh"
    hwh.write_text(
        handmade.hwh(
            "two",
            [
                ("axi_dma_0", 0xA0000000, False, 23, 32),
                ("axi_dma_1", 0xA0010000, True, 26, 32),
            ],
        )
    )
    (tmp_path / "two.bit").write_bytes(handmade.bit("two"))
    s = served("--hwh", str(hwh))
    out = s.run(
        SG_FIX
        + f"""
import numpy as np
from pynq import Overlay, allocate
ol = Overlay({str(tmp_path / "two.bit")!r})
data = np.arange(4096, dtype=np.uint32) * 2654435761
for name in ("axi_dma_0", "axi_dma_1"):
    dma = getattr(ol, name)
    tx = allocate(shape=data.shape, dtype=np.uint32)
    rx = allocate(shape=data.shape, dtype=np.uint32)
    tx[:] = data
    dma.sendchannel.transfer(tx)
    dma.recvchannel.transfer(rx)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert (np.asarray(rx) == data).all(), name
    print(name, type(dma.sendchannel).__name__)
"""
    ).stdout
    assert "axi_dma_0 _SDMAChannel" in out and "axi_dma_1 _SGDMAChannel" in out, out


def test_an_engine_aimed_at_another_clients_buffer_is_refused(served, overlays):
    # One PYNQ client holds a buffer; another programs the engine by hand
    # (as PYNQ's DMA driver does, through MMIO) to write into it: the LENGTH
    # write that would start S2MM is refused, naming the range; its own
    # buffer works.
    s = served()
    env = dict(os.environ, PYNQ_REMOTE_DEVICES=s.ip)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, numpy as np
                from pynq import Overlay, allocate
                ol = Overlay({str(overlays / "loopback.bit")!r})
                b = allocate(shape=(1024,), dtype=np.uint32)
                print(b.physical_address, flush=True)
                sys.stdin.readline()
                """
            ),
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        theirs = int(holder.stdout.readline())
        out = s.run(
            f"""
            import numpy as np
            from pynq import MMIO, allocate
            m = MMIO(0x40400000, 0x10000)
            m.write(0x30, 1)
            m.write(0x48, {theirs})
            try:
                m.write(0x58, 4096)
                print("started")
            except RuntimeError as e:
                print("refused:", e)
            mine = allocate(shape=(1024,), dtype=np.uint32)
            m.write(0x48, mine.physical_address)
            m.write(0x58, 4096)
            print("own started")
            """
        ).stdout
        assert f"refused: S2MM of axi_dma_0 not started: the buffer {theirs:#x}.." in out, out
        assert "own started" in out, out
    finally:
        holder.stdin.close()
        holder.wait(timeout=TIMEOUT)


def test_ps_gpio_through_pynqs_gpio(served):
    # PYNQ's GPIO (RemoteGPIO over PYNQ.remote): the first EMIO pin of the
    # Zynq UltraScale+ PS's controller, driven as an output and read back.
    s = served()
    out = s.run(
        """
        from pynq import GPIO, Device
        dev = Device.active_device
        pin = GPIO.get_gpio_pin(0, device=dev)
        assert pin == 338 + 78, pin
        assert GPIO.get_gpio_npins(device=dev) == 174
        o = GPIO(pin, "out", device=dev)
        o.write(1)
        i = GPIO(pin, "in", device=dev)
        assert i.read() == 1
        assert i.is_exported()
        i.release()
        assert not i.is_exported()
        print("GPIO", pin)
        """
    ).stdout
    assert "GPIO 416" in out


def test_a_client_gone_mid_transfer_leaves_the_engine_halted(served, overlays):
    # A client starts S2MM into its buffer with nothing sent, then dies: the
    # server frees its buffers only after halting the engine that could
    # still write them.
    s = served()
    s.run(
        f"""
        import os
        import numpy as np
        from pynq import Overlay, allocate
        ol = Overlay({str(overlays / "loopback.bit")!r})
        out = allocate(shape=(1024,), dtype=np.uint32)
        ol.axi_dma_0.recvchannel.transfer(out)
        assert int(ol.axi_dma_0.register_map.S2MM_DMASR.Idle) == 0
        os._exit(0)
        """
    )
    out = s.run(
        """
        import time
        from pynq import MMIO
        m = MMIO(0x40400000, 0x10000)
        end = time.time() + 10
        while m.read(0x34) & 1 == 0 and time.time() < end:
            time.sleep(0.05)
        print("S2MM_DMASR", hex(m.read(0x34)))
        """
    ).stdout
    assert int(out.split()[-1], 16) & 1 == 1, out


def test_bad_requests_are_errors_and_the_server_keeps_serving(served, overlays):
    s = served()
    out = s.run(
        f"""
        import grpc
        from pynq import Device
        from pynq.remote import buffer_pb2, mmio_pb2, remote_device_pb2
        dev = Device.active_device
        b, m, d = dev._stub["buffer"], dev._stub["mmio"], dev._stub["device"]
        r = b.read(buffer_pb2.BufferReadRequest(buffer_id="12345"))
        assert "no buffer" in next(iter(r)).msg
        a = b.allocate(buffer_pb2.AllocateRequest(size=64, dtype="<u4"))
        r = b.read(buffer_pb2.BufferReadRequest(buffer_id=a.buffer_id, start=0, end=65))
        assert "outside buffer" in next(iter(r)).msg
        assert b.allocate(buffer_pb2.AllocateRequest(size=-1)).msg
        assert b.allocate(buffer_pb2.AllocateRequest(size=2**31 - 1)).msg
        g = m.get_mmio(mmio_pb2.GetMmioRequest(base_addr=0x0, length=4))
        assert not g.status and "outside every IP" in g.msg
        rr = m.read(mmio_pb2.ReadRequest(mmio_id="40400000:10000", offset=0x10000, length=4))
        assert not rr.status and "outside" in rr.msg
        for path in ("/etc/passwd", "/lib/firmware/../../etc/passwd"):
            assert not dev.exists_file(path).exists
            try:
                dev.read_file(path)
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.NOT_FOUND
            else:
                raise AssertionError(path)
        try:
            dev.write_file("/etc/x", b"x")
        except grpc.RpcError as e:
            assert "not a file this board serves" in e.details()
        else:
            raise AssertionError("write outside the file set")
        try:
            dev.write_file("/lib/firmware/big.bin", bytes(65 << 20))
        except grpc.RpcError as e:
            assert "more than" in e.details() or e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        else:
            raise AssertionError("an oversized firmware was accepted")
        # Still serving, with the bad requests behind it.
        assert "aarch64" in dev.read_file("/proc/version").decode()
        print("ok")
        """
    ).stdout
    assert "ok" in out


def fake_board(root):
    """A board's sysfs and /dev as plain files (no engine behind them): one
    IP's registers as UIO device `gpio_leds`, a u-dma-buf, the FPGA manager."""
    (root / "dev").mkdir()
    d = root / "sys/class/uio/uio0"
    (d / "maps/map0").mkdir(parents=True)
    (d / "name").write_text("gpio_leds\n")
    (d / "maps/map0/addr").write_text("0x41200000\n")
    (d / "maps/map0/size").write_text("0x10000\n")
    (root / "dev/uio0").write_bytes(bytes(0x10000))
    ub = root / "sys/class/u-dma-buf/udmabuf0"
    ub.mkdir(parents=True)
    (ub / "phys_addr").write_text("0x38000000\n")
    (ub / "size").write_text(f"{4 << 20}\n")
    (ub / "dma_coherent").write_text("1\n")
    (root / "dev/udmabuf0").write_bytes(bytes(4 << 20))
    (root / "sys/class/fpga_manager/fpga0").mkdir(parents=True)
    (root / "lib/firmware").mkdir(parents=True)


def test_a_real_board_through_uio_and_u_dma_buf(served, tmp_path):
    # `--board ROOT` in place of pynq-cpp: registers are the UIO device's,
    # buffers the u-dma-buf's (data in its memory at its physical address),
    # and a bitstream is written to /lib/firmware and programmed through the
    # FPGA manager, as PYNQ's client asks.
    fake_board(tmp_path)
    s = served("--board", str(tmp_path))
    out = s.run(
        """
        import numpy as np
        from pynq import MMIO, Device
        dev = Device.active_device
        MMIO(0x41200000, 0x10000).write(8, 0x5A)
        assert MMIO(0x41200000, 0x10000).read(8) == 0x5A
        a = dev.allocate((1024,), np.uint16)
        a[:] = np.arange(1024, dtype=np.uint16)
        a.flush()
        print("phys", a.physical_address)
        dev.write_file("/lib/firmware/design.bin", b"\\x01\\x02\\x03\\x04")
        dev.write_file("/sys/class/fpga_manager/fpga0/flags", b"0")
        dev.write_file("/sys/class/fpga_manager/fpga0/firmware", b"design.bin")
        """
    ).stdout
    assert (tmp_path / "dev/uio0").read_bytes()[8:12] == (0x5A).to_bytes(4, "little")
    phys = int(out.split()[-1])
    assert 0x3800_0000 <= phys < 0x3800_0000 + (4 << 20)
    off = phys - 0x3800_0000
    raw = (tmp_path / "dev/udmabuf0").read_bytes()[off : off + 2048]
    assert np.array_equal(np.frombuffer(raw, dtype=np.uint16), np.arange(1024))
    assert (tmp_path / "lib/firmware/design.bin").read_bytes() == b"\x01\x02\x03\x04"
    assert (tmp_path / "sys/class/fpga_manager/fpga0/firmware").read_text() == "design.bin"
    assert (tmp_path / "sys/class/fpga_manager/fpga0/flags").read_text() == "0"


def test_ps_gpio_on_a_real_board_through_sysfs(served, tmp_path):
    # `--board`: PYNQ's GPIO goes to Linux's GPIO sysfs as pynq-cpp drives
    # it: the controller found by its label, the pin's direction and value
    # written (plain files here, where sysfs would drive the pin).
    fake_board(tmp_path)
    g = tmp_path / "sys/class/gpio"
    (g / "gpiochip338").mkdir(parents=True)
    (g / "gpiochip338/label").write_text("zynqmp_gpio\n")
    (g / "gpiochip338/ngpio").write_text("174\n")
    (g / "gpio416").mkdir()
    (g / "gpio416/value").write_text("0\n")
    s = served("--board", str(tmp_path))
    out = s.run(
        """
        from pynq import GPIO, Device
        dev = Device.active_device
        pin = GPIO.get_gpio_pin(0, device=dev)
        assert GPIO.get_gpio_npins(device=dev) == 174
        GPIO(pin, "out", device=dev).write(1)
        print("pin", pin)
        """
    ).stdout
    assert "pin 416" in out
    assert (g / "gpio416/direction").read_text() == "out"
    assert (g / "gpio416/value").read_text() == "1"
