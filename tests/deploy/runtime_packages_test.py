"""scripts/runtime-packages.txt lists exactly the Debian packages that the
built binaries load, so the runtime image's package list cannot rot.

Runs `ldd` on slackswapd and slackswap, maps every library it resolves to
its Debian package with `dpkg -S`, and checks that:

- every one is in scripts/runtime-packages.txt or in the base list every
  Debian image has (libc6, libstdc++6, libgcc-s1) — plus, in a sanitizer
  build (--sanitize), the sanitizer runtimes, which the image never has;
- every package listed is needed by some binary (no dead entries), except
  those the binaries read rather than load (READ_NOT_LOADED), each of
  which must be installed with the file it is listed for;
- no library is unresolved;
- `scripts/install.sh --runtime-packages --check` (the runtime stage's own
  step, in check mode, copied alone into a directory as the image does)
  finds them all installed.

  /usr/bin/python3 tests/deploy/runtime_packages_test.py \
      build/server/slackswapd build/cli/slackswap [--sanitize address]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_util as du  # noqa: E402

BASE = {"libc6", "libstdc++6", "libgcc-s1"}
# Packages the binaries read at run time without loading a library of
# theirs: {package: the file read}. OpenSSL's default verify paths read the
# system CA bundle for a rediss:// --shared_store without
# --shared_store_tls_ca_file.
READ_NOT_LOADED = {"ca-certificates": "/etc/ssl/certs/ca-certificates.crt"}
# GCC's sanitizer runtimes (Debian 12, g++ 12), for -DSLACKSWAP_SANITIZE.
SANITIZER_RUNTIMES = {"libasan8", "libubsan1", "libtsan2", "liblsan0"}


def libraries(binary):
    r = subprocess.run(["ldd", binary], capture_output=True, text=True,
                       timeout=60)
    du.check(r.returncode == 0, f"ldd {binary} failed: {r.stderr}")
    libs = []
    for line in r.stdout.splitlines():
        line = line.strip()
        du.check("not found" not in line, f"{binary}: unresolved {line}")
        m = re.match(r"\S+ => (/\S+) \(", line) or re.match(r"(/\S+) \(",
                                                           line)
        if m:  # linux-vdso has no file
            libs.append(m.group(1))
    return libs


def candidates(path):
    """The names dpkg may know a library by (merged /usr, symlinks)."""
    out = []
    for p in (path, os.path.realpath(path)):
        for q in (p, p[4:] if p.startswith("/usr/") else "/usr" + p):
            if q not in out:
                out.append(q)
    return out


def packages_of(paths):
    """{library path: Debian package}, with one `dpkg -S` for them all."""
    names = sorted({c for p in paths for c in candidates(p)})
    r = subprocess.run(["dpkg", "-S"] + names, capture_output=True,
                       text=True, timeout=120)
    owner = {}
    for line in r.stdout.splitlines():
        if line.startswith("diversion"):
            continue
        # "libfoo1:amd64: /usr/lib/x86_64-linux-gnu/libfoo.so.1"
        pkgs, _, file = line.rpartition(": ")
        owner[file.strip()] = pkgs.split(",")[0].split(":")[0].strip()
    out = {}
    for p in paths:
        found = [owner[c] for c in candidates(p) if c in owner]
        du.check(found, f"no Debian package owns {p} (dpkg -S); a library "
                 f"built by hand would be missing from the image")
        out[p] = found[0]
    return out


def listed_packages(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            out += line.split("#", 1)[0].split()
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--sanitize", default="",
                        help="SLACKSWAP_SANITIZE of the build, if any")
    args = parser.parse_args()

    listed_path = os.path.join(du.REPO, "scripts", "runtime-packages.txt")
    listed = listed_packages(listed_path)
    du.check(listed, "scripts/runtime-packages.txt lists no package")
    du.check(len(set(listed)) == len(listed),
             "scripts/runtime-packages.txt lists a package twice")
    allowed_extra = SANITIZER_RUNTIMES if args.sanitize else set()

    libs = set()
    for b in args.binaries:
        du.check(os.access(b, os.X_OK), f"{b} is not built")
        libs.update(libraries(b))
    needed = {}  # package -> libraries
    for lib, package in packages_of(sorted(libs)).items():
        needed.setdefault(package, set()).add(os.path.basename(lib))
    missing = sorted(p for p in needed
                     if p not in listed and p not in BASE and
                     p not in allowed_extra)
    du.check(not missing, "scripts/runtime-packages.txt lacks packages the "
             "binaries load:\n" + "\n".join(
                 f"  {p}: {', '.join(sorted(needed[p]))}" for p in missing))
    unused = sorted(p for p in listed
                    if p not in needed and p not in READ_NOT_LOADED)
    du.check(not unused, f"scripts/runtime-packages.txt lists packages no "
             f"binary loads: {unused}")
    for package, path in READ_NOT_LOADED.items():
        du.check(package in listed, f"scripts/runtime-packages.txt lacks "
                 f"{package} ({path}, which the binaries read)")
        du.check(os.path.isfile(path) and os.path.getsize(path) > 0,
                 f"{path} is missing or empty: {package} is what provides "
                 f"it (update-ca-certificates)")
    sanitizers = sorted(set(needed) & allowed_extra)
    print(f"ok: {len(needed)} packages loaded by "
          f"{', '.join(os.path.basename(b) for b in args.binaries)}: "
          f"{len(listed)} listed, the rest base ({', '.join(sorted(BASE))})"
          + (f" or sanitizer runtimes ({', '.join(sanitizers)})"
             if sanitizers else ""))

    # As the image's runtime stage runs it: the two files alone in a
    # directory, outside the repository.
    with tempfile.TemporaryDirectory(prefix="slackswap-runtime-") as d:
        for name in ("install.sh", "runtime-packages.txt"):
            shutil.copy(os.path.join(du.REPO, "scripts", name), d)
        r = subprocess.run(["bash", os.path.join(d, "install.sh"),
                            "--runtime-packages", "--check"], cwd=d,
                           capture_output=True, text=True, timeout=60)
    du.check(r.returncode == 0, f"install.sh --runtime-packages --check "
             f"exited {r.returncode}: {r.stderr}")
    print("ok: install.sh --runtime-packages --check, run on its own as "
          "the image does: all installed")
    print("PASS")


if __name__ == "__main__":
    main()
