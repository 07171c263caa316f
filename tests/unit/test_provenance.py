"""Provenance: CPU model and ISA level, threads, GPU (only when the job used one), package versions."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from importlib import metadata

import pytest

from tabrepro import provenance as prov

# Abridged /proc/cpuinfo entries (two processors each: only the first may be read).
XEON_SPR = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx fma avx2 avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: something else entirely
flags\t\t: fpu
"""
EPYC_AVX2 = """processor\t: 0
cpu family\t: 23
model\t\t: 49
model name\t: AMD EPYC 7B12
flags\t\t: fpu sse4_2 avx fma avx2 sha_ni
"""
COOPER_LAKE = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8380H
flags\t\t: sse4_2 avx avx2 avx512f avx512bw avx512_bf16
"""
GRAVITON = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes sve sve2 bf16 i8mm
CPU implementer\t: 0x41
CPU part\t: 0xd4f
"""


def test_parse_cpuinfo_reads_model_flags_and_isa_level():
    spr = prov.parse_cpuinfo(XEON_SPR)
    assert spr["model"] == "Intel(R) Xeon(R) Platinum 8480+"  # the second block is not read
    assert spr["isa_level"] == "AMX"
    assert {"avx512_bf16", "amx_tile", "avx2"} <= set(spr["flags"]) and "fpu" not in spr["flags"]
    epyc = prov.parse_cpuinfo(EPYC_AVX2)
    assert (epyc["model"], epyc["isa_level"], epyc["flags"]) == (
        "AMD EPYC 7B12",
        "AVX2",
        ["sse4_2", "avx", "fma", "avx2"],
    )
    assert epyc["family_model"] == "family 23 model 49"  # "model" is not "model name"
    assert "family_model" not in prov.parse_cpuinfo(COOPER_LAKE)  # no family lines in that text
    assert prov.parse_cpuinfo(COOPER_LAKE)["isa_level"] == "AVX-512 BF16"
    arm = prov.parse_cpuinfo(GRAVITON)
    assert arm["model"] == "implementer 0x41 part 0xd4f" and arm["isa_level"] == "SVE2"
    assert prov.isa_level(["avx512f", "avx2"]) == "AVX-512"
    assert prov.isa_level([]) == "baseline"


def test_provenance_of_this_machine_and_process():
    record = prov.provenance(threads=3)
    cpu = record["cpu"]
    assert cpu["model"] and cpu["model"] != "unknown"
    assert cpu["logical_cores"] == os.cpu_count()
    assert 1 <= cpu["available_cores"] <= cpu["logical_cores"]
    if os.path.isfile("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        assert cpu["model"] in text and all(f" {flag}" in text for flag in cpu["flags"])
    assert (record["threads"], record["threads_source"]) == (3, "job")
    default = prov.provenance()
    assert default["threads_source"] == "process"
    if "torch" in sys.modules:
        assert default["threads"] == sys.modules["torch"].get_num_threads()
    assert prov.cpu_info() is prov.cpu_info()  # read once per process


def test_package_versions_cover_every_model_library():
    versions = prov.package_versions()
    for name in (
        "numpy",
        "scipy",
        "pandas",
        "scikit-learn",
        "torch",
        "xgboost-cpu",
        "catboost",
        "lightgbm",
        "pytorch-tabnet",
        "rtdl_revisiting_models",
        "entmax",
    ):
        assert name in prov.TRACKED_PACKAGES, name
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            assert name not in versions
            continue
        assert versions[name] == installed, name
    import numpy

    assert versions["numpy"] == numpy.__version__


def test_provenance_does_not_import_torch():
    code = (
        "import sys, json; from tabrepro.provenance import provenance; p = provenance(); "
        "assert 'torch' not in sys.modules, 'torch imported'; "
        "assert p['gpu'] is None and 'torch' not in p['thread_pools'] and p['cpu']['torch_capability'] is None; "
        "print(json.dumps(p['cpu']))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert '"isa_level"' in run.stdout


def _fake_torch(initialized: bool) -> types.SimpleNamespace:
    def properties(index):
        if not initialized:
            raise AssertionError("device properties read although CUDA was never initialised")
        return types.SimpleNamespace(name=f"Fake GPU {index}", major=9, minor=0, total_memory=80 * 2**30)

    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        is_initialized=lambda: initialized,
        device_count=lambda: 2,
        current_device=lambda: 1,
        get_device_properties=properties,
    )
    cudnn = types.SimpleNamespace(is_available=lambda: True, version=lambda: 91002)
    return types.SimpleNamespace(
        cuda=cuda,
        version=types.SimpleNamespace(cuda="12.8", hip=None),
        backends=types.SimpleNamespace(cudnn=cudnn),
        get_num_threads=lambda: 4,
    )


def test_gpu_is_named_only_when_the_job_used_cuda(monkeypatch):
    prov._cuda_device.cache_clear()
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(initialized=False))
    assert prov.gpu_info() == {"used": False, "device_count": 2}
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(initialized=True))
    gpu = prov.gpu_info()
    assert gpu == {
        "used": True,
        "name": "Fake GPU 1",
        "capability": "9.0",
        "memory_mb": 81920,
        "device_count": 2,
        "cuda": "12.8",
        "cudnn": 91002,
        "hip": None,
    }
    monkeypatch.delitem(sys.modules, "torch")
    assert prov.gpu_info() is None
    prov._cuda_device.cache_clear()


def test_hardware_key_separates_cpu_types_isa_levels_and_gpus():
    epyc = {"cpu": prov.parse_cpuinfo(EPYC_AVX2), "gpu": None}
    assert prov.hardware_key(epyc) == "AMD EPYC 7B12 · AVX2"
    assert prov.hardware_key({"cpu": prov.parse_cpuinfo(XEON_SPR)}) != prov.hardware_key(epyc)
    unused = {**epyc, "gpu": {"used": False, "device_count": 1}}
    assert prov.hardware_key(unused) == prov.hardware_key(epyc)  # an idle GPU does not matter
    used = {**epyc, "gpu": {"used": True, "name": "NVIDIA H100", "cuda": "12.8", "cudnn": 91002}}
    assert "GPU NVIDIA H100 (CUDA 12.8, cuDNN 91002)" in prov.hardware_key(used)
    assert prov.hardware_key({"git_commit": "abc"}) == prov.UNRECORDED == prov.hardware_key(None)


def test_real_cuda_device_is_recorded():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    torch.ones(4, device="cuda").sum().item()  # initialise CUDA, as a GPU job would
    gpu = prov.provenance()["gpu"]
    assert gpu["used"] and gpu["name"] == torch.cuda.get_device_name(torch.cuda.current_device())
    assert gpu["cuda"] == torch.version.cuda and gpu["cudnn"] == torch.backends.cudnn.version()


def test_outside_git_the_commit_is_unknown_unless_declared(tmp_path, monkeypatch):
    monkeypatch.delenv("TABREPRO_DECLARED_COMMIT", raising=False)
    assert prov.git_commit(tmp_path) == "unknown"
    monkeypatch.setenv("TABREPRO_DECLARED_COMMIT", "abc123")
    assert prov.git_commit(tmp_path) == "abc123+declared"
    assert "+declared" not in prov.git_commit()  # inside the repository git's answer wins
