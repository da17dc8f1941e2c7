"""A Vivado hardware handoff (.hwh) and bitstream (.bit) pair written by
hand, independently of dmaflow's exporter: a Zynq UltraScale+ PS and one AXI
DMA (PG021 parameters as Vivado writes them) at a chosen address."""

import struct

PS_PARAMS = {"C_MAXIGP0_DATA_WIDTH": "128", "C_SAXIGP2_DATA_WIDTH": "64"}
for _i in range(4):
    PS_PARAMS[f"PSU__FPGA_PL{_i}_ENABLE"] = "1" if _i == 0 else "0"
    _clk = f"PSU__CRL_APB__PL{_i}_REF_CTRL__"
    PS_PARAMS[_clk + "SRCSEL"] = "IOPLL"
    PS_PARAMS[_clk + "DIVISOR0"] = "15"
    PS_PARAMS[_clk + "DIVISOR1"] = "1"
    PS_PARAMS[_clk + "FREQMHZ"] = "100"
    PS_PARAMS[_clk + "ACT_FREQMHZ"] = "99.999001"


def dma_module(name, base, sg, length_width, width):
    params = {
        "C_INCLUDE_SG": str(int(sg)),
        "C_SG_LENGTH_WIDTH": str(length_width),
        "C_INCLUDE_MM2S": "1",
        "C_INCLUDE_S2MM": "1",
        "C_M_AXI_MM2S_DATA_WIDTH": str(width),
        "C_M_AXI_S2MM_DATA_WIDTH": str(width),
        "C_M_AXIS_MM2S_TDATA_WIDTH": str(width),
        "C_S_AXIS_S2MM_TDATA_WIDTH": str(width),
        "C_MM2S_BURST_SIZE": "16",
        "C_S2MM_BURST_SIZE": "16",
        "C_INCLUDE_MM2S_DRE": "0",
        "C_INCLUDE_S2MM_DRE": "0",
        "C_MICRO_DMA": "0",
        "C_ADDR_WIDTH": "32",
        "C_BASEADDR": "0x%08X" % base,
        "C_HIGHADDR": "0x%08X" % (base + 0xFFFF),
    }
    # Vivado writes each of PG021's parameters twice: as the HDL generic
    # (C_INCLUDE_SG) and as the IP's user parameter (c_include_sg), which is
    # the one PYNQ's DMA driver reads.
    p = "\n".join(
        f'        <PARAMETER NAME="{k}" VALUE="{v}"/>\n'
        f'        <PARAMETER NAME="{k.lower()}" VALUE="{v}"/>'
        for k, v in params.items()
    )
    return f"""    <MODULE FULLNAME="/{name}" HWVERSION="7.1" INSTANCE="{name}" IPTYPE="PERIPHERAL" IS_ENABLE="1" MODCLASS="PERIPHERAL" MODTYPE="axi_dma" VLNV="xilinx.com:ip:axi_dma:7.1">
      <PARAMETERS>
{p}
      </PARAMETERS>
      <PORTS>
        <PORT DIR="O" NAME="mm2s_introut" SIGIS="INTERRUPT" SENSITIVITY="LEVEL_HIGH" SIGNAME="{name}_mm2s_introut">
          <CONNECTIONS><CONNECTION INSTANCE="zynq_ultra_ps_e_0" PORT="pl_ps_irq0"/></CONNECTIONS>
        </PORT>
      </PORTS>
      <BUSINTERFACES>
        <BUSINTERFACE BUSNAME="ps_M_AXI_HPM0_FPD" DATAWIDTH="32" NAME="S_AXI_LITE" TYPE="SLAVE" VLNV="xilinx.com:interface:aximm:1.0">
          <PARAMETER NAME="DATA_WIDTH" VALUE="32"/>
        </BUSINTERFACE>
      </BUSINTERFACES>
    </MODULE>
"""


def custom_module(name, base):
    """An IP of the user's own (an HLS core, say) with a 64 KiB window."""
    return f"""    <MODULE FULLNAME="/{name}" HWVERSION="1.0" INSTANCE="{name}" IPTYPE="PERIPHERAL" IS_ENABLE="1" MODCLASS="PERIPHERAL" MODTYPE="{name[:-2]}" VLNV="user.org:hls:{name[:-2]}:1.0">
      <PARAMETERS>
        <PARAMETER NAME="C_S_AXI_CONTROL_BASEADDR" VALUE="0x{base:08X}"/>
      </PARAMETERS>
      <BUSINTERFACES>
        <BUSINTERFACE BUSNAME="ps_M_AXI_HPM0_FPD" DATAWIDTH="32" NAME="s_axi_control" TYPE="SLAVE" VLNV="xilinx.com:interface:aximm:1.0"/>
      </BUSINTERFACES>
    </MODULE>
"""


def hwh(name, dmas, customs=()):
    """`dmas`: (instance, base address, sg, length width, data width);
    `customs`: (instance, base address) of IP of the user's own."""
    ps_params = "\n".join(
        f'        <PARAMETER NAME="{k}" VALUE="{v}"/>' for k, v in PS_PARAMS.items()
    )
    ranges = "\n".join(
        f'        <MEMRANGE ADDRESSBLOCK="Reg" BASENAME="C_BASEADDR" BASEVALUE="0x{b:08X}" '
        f'HIGHNAME="C_HIGHADDR" HIGHVALUE="0x{b + 0xFFFF:08X}" INSTANCE="{n}" IS_DATA="TRUE" '
        f'IS_INSTRUCTION="TRUE" MASTERBUSINTERFACE="M_AXI_HPM0_FPD" MEMTYPE="REGISTER" '
        f'SLAVEBUSINTERFACE="S_AXI_LITE"/>'
        for n, b, *_ in list(dmas) + list(customs)
    )
    mods = "".join(dma_module(*d) for d in dmas) + "".join(custom_module(*c) for c in customs)
    return f"""<?xml version="1.0" encoding="UTF-8" standalone="no" ?>
<EDKSYSTEM EDWVERSION="1.2" TIMESTAMP="Mon Nov 23 10:00:00 2026" VIVADOVERSION="2024.1">
  <SYSTEMINFO ARCH="zynquplus" DEVICE="xczu3eg" NAME="{name}" PACKAGE="sbva484" SPEEDGRADE="-1"/>
  <EXTERNALPORTS/>
  <EXTERNALINTERFACES/>
  <MODULES>
    <MODULE FULLNAME="/zynq_ultra_ps_e_0" HWVERSION="3.5" INSTANCE="zynq_ultra_ps_e_0" IPTYPE="PERIPHERAL" IS_ENABLE="1" IS_PL="FALSE" MODTYPE="zynq_ultra_ps_e" VLNV="xilinx.com:ip:zynq_ultra_ps_e:3.5">
      <PARAMETERS>
{ps_params}
      </PARAMETERS>
      <PORTS>
        <PORT DIR="I" LEFT="0" NAME="pl_ps_irq0" RIGHT="0" SENSITIVITY="LEVEL_HIGH" SIGIS="INTERRUPT"/>
      </PORTS>
      <BUSINTERFACES>
        <BUSINTERFACE BUSNAME="ps_M_AXI_HPM0_FPD" DATAWIDTH="128" NAME="M_AXI_HPM0_FPD" TYPE="MASTER" VLNV="xilinx.com:interface:aximm:1.0">
          <PARAMETER NAME="DATA_WIDTH" VALUE="128"/>
        </BUSINTERFACE>
      </BUSINTERFACES>
      <MEMORYMAP>
{ranges}
      </MEMORYMAP>
    </MODULE>
{mods}  </MODULES>
</EDKSYSTEM>
"""


def bit(design, payload_words=64):
    """A .bit container as Vivado writes it: a header of length-prefixed
    fields (design, part, date, time) then 0x65, a 32-bit length and a
    payload of whole 32-bit words."""

    def field(key, text):
        data = text.encode("ascii") + b"\0"
        return bytes([key]) + struct.pack(">H", len(data)) + data

    head = struct.pack(">H", 9) + bytes(9) + struct.pack(">H", 1)
    head += field(0x61, f"{design};UserID=0XFFFFFFFF;Version=2024.1")
    head += field(0x62, "xczu3eg-sbva484-1-e")
    head += field(0x63, "2026/11/23")
    head += field(0x64, "10:00:00")
    payload = b"\xff\xff\xff\xff" * 8 + bytes.fromhex("000000bb11220044ffffffffffffffffaa995566")
    payload += bytes(4 * payload_words)
    return head + b"\x65" + struct.pack(">I", len(payload)) + payload
