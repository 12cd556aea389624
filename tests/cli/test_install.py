#!/usr/bin/env python3
"""pipesim finds what it loads at run time relative to its own binary: a build tree that is copied elsewhere
(and the original removed from reach) and a tree made by `cmake --install` both find their modules (CUDA
calibration, CUDA replay, MPI transport) and their data.

Usage: test_install.py BUILD_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = None
MODULES = ["libpipesim_cuda_calibration.so", "libpipesim_cuda_replay.so", "libpipesim_mpi_transport.so"]


def run(binary, *args, cwd=None, env=None):
    out = subprocess.run([binary] + list(args), capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    return out.returncode, out.stdout, out.stderr


def clean_env():
    env = dict(os.environ)
    for key in ["PIPESIM_MODULE_DIR", "PIPESIM_DATA_DIR"]:
        env.pop(key, None)
    return env


class Relocation(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.built = [m for m in MODULES if os.path.exists(os.path.join(BUILD, "lib", "pipesim", m))]
        self.plan = os.path.join(self.tmp.name, "tiny.plan.json")
        rc, _, err = run(os.path.join(BUILD, "cli", "pipesim"), "simulate", "--model", "qwen3-1.7b", "--pp", "1",
                         "--microbatches", "1", "--seq", "128", "--hw", "h100-sxm-8x", "--schedule", "1f1b",
                         "--plan-out", self.plan, env=clean_env())
        self.assertEqual(rc, 0, err)

    def tearDown(self):
        self.tmp.cleanup()

    def expect_modules_found(self, binary):
        """The CUDA replay module loads (it then says why it cannot run here), or was never built."""
        rc, _, err = run(binary, "replay", self.plan, "--backend", "cuda", cwd=self.tmp.name, env=clean_env())
        self.assertNotIn("not found in", err)
        if "libpipesim_cuda_replay.so" in self.built:
            if rc != 0:  # no device here: the module loaded and says why it did not run
                self.assertIn("the cuda replay did not run", err)
                self.assertNotIn("cannot load", err)
        else:
            self.assertIn("built without CUDA", err)

    def test_a_moved_build_tree_finds_its_modules(self):
        moved = os.path.join(self.tmp.name, "moved")
        os.makedirs(os.path.join(moved, "cli"))
        shutil.copy2(os.path.join(BUILD, "cli", "pipesim"), os.path.join(moved, "cli", "pipesim"))
        shutil.copytree(os.path.join(BUILD, "lib"), os.path.join(moved, "lib"))
        self.expect_modules_found(os.path.join(moved, "cli", "pipesim"))
        # The original's modules out of reach: the moved binary must not be using them.
        hidden = os.path.join(BUILD, "lib", "pipesim.hidden-by-test")
        os.rename(os.path.join(BUILD, "lib", "pipesim"), hidden)
        try:
            self.expect_modules_found(os.path.join(moved, "cli", "pipesim"))
        finally:
            os.rename(hidden, os.path.join(BUILD, "lib", "pipesim"))
        # Without its modules it says where it looked, in one line.
        shutil.rmtree(os.path.join(moved, "lib"))
        if "libpipesim_cuda_replay.so" in self.built:
            rc, _, err = run(os.path.join(moved, "cli", "pipesim"), "replay", self.plan, "--backend", "cuda",
                             env=clean_env())
            self.assertEqual(rc, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("libpipesim_cuda_replay.so not found in", err)
            self.assertIn(os.path.join(moved, "lib", "pipesim"), err)

    def test_an_installed_tree_finds_its_modules_and_data(self):
        prefix = os.path.join(self.tmp.name, "prefix")
        out = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        binary = os.path.join(prefix, "bin", "pipesim")
        for m in self.built:
            self.assertTrue(os.path.exists(os.path.join(prefix, "lib", "pipesim", m)), m)
        for folder in ["hw_profiles", "models", "frameworks", "fill_jobs"]:
            self.assertTrue(os.listdir(os.path.join(prefix, "share", "pipesim", folder)), folder)
        self.expect_modules_found(binary)
        # Shipped data from share/pipesim: a profile added there is listed by name.
        shutil.copy(os.path.join(prefix, "share", "pipesim", "hw_profiles", "h100-sxm-8x.json"),
                    os.path.join(prefix, "share", "pipesim", "hw_profiles", "installed-only.json"))
        rc, out_text, err = run(binary, "simulate", "--hw", "installed-only", "--model", "qwen3-1.7b", "--pp", "1",
                                "--microbatches", "1", cwd=self.tmp.name, env=clean_env())
        self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    BUILD = os.path.abspath(sys.argv.pop(1))
    unittest.main()
