#!/usr/bin/env bash
# Runs the README's two commands on a new Debian 12 machine: a minimal bookworm root made with
# debootstrap under build/fresh/, the checkout copied in, the commands chrooted into it one
# after the other, as a new user runs them, with each one's exit code and wall time printed.
# It proves that scripts/setup.sh installs everything: the host's hand-installed packages
# are not there. Too slow for CI (most of an hour on 2 cores); run it after any set-up change.
#
#   scripts/fresh-check.sh                 regenerate.sh, then test.sh, in one new root
#   scripts/fresh-check.sh --separate      each command in its own new root (both start cold)
#   scripts/fresh-check.sh --only test     just scripts/test.sh (or: --only regenerate)
#   scripts/fresh-check.sh --keep          keep the roots for a look afterwards
#   scripts/fresh-check.sh --new-base      debootstrap again instead of reusing build/fresh/base
#   scripts/fresh-check.sh --base-only     just make the base root
#
# The base root is debootstrapped once (Debian mirror from the host's apt sources, or
# $FRESH_MIRROR) and reused untouched: every check runs in a copy. Needs root.
# Logs: build/fresh/<command>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
work=$src/build/fresh
base=$work/base
suite=bookworm

only="" keep=0 new_base=0 base_only=0 separate=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) only=${2:?--only needs regenerate or test}; shift 2 ;;
    --keep) keep=1; shift ;;
    --separate) separate=1; shift ;;
    --new-base) new_base=1; shift ;;
    --base-only) base_only=1; shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$only" in "" | regenerate | test) ;; *)
  echo "fresh-check: --only takes 'regenerate' or 'test', not '$only'" >&2; exit 2 ;;
esac
[[ $(id -u) -eq 0 ]] || { echo "fresh-check: needs root (debootstrap, chroot, mount)" >&2; exit 1; }

# The host's own Debian mirror: the first URI of a deb entry for the main archive.
mirror() {
  if [[ -n "${FRESH_MIRROR:-}" ]]; then echo "$FRESH_MIRROR"; return; fi
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk '/^URIs:/ {print $2; exit}' "$f" | grep -v security && return
  done
  awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null |
    grep . && return
  echo "fresh-check: no Debian mirror in /etc/apt sources; set FRESH_MIRROR" >&2
  exit 1
}

make_base() {
  if [[ $new_base -eq 0 && -f $base/.fresh-check-complete ]]; then
    echo "fresh-check: reusing the debootstrapped base $base"
    return
  fi
  if ! command -v debootstrap >/dev/null; then
    echo "fresh-check: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 debootstrap ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
          --no-install-recommends debootstrap; }
  fi
  remove_root "$base"
  mkdir -p "$work"
  local m
  m=$(mirror)
  echo "fresh-check: debootstrap --variant=minbase $suite from $m"
  local t0=$SECONDS
  debootstrap --variant=minbase "$suite" "$base" "$m" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; echo "fresh-check: debootstrap failed" >&2; exit 1; }
  # The release's updates and security suites, as a Debian 12 install has them.
  cat >"$base/etc/apt/sources.list" <<EOF
deb $m $suite main
deb $m $suite-updates main
deb ${m%/debian}/debian-security $suite-security main
EOF
  touch "$base/.fresh-check-complete"
  echo "fresh-check: base ready in $((SECONDS - t0)) s"
}

# Unmounts everything mounted under $1 (deepest first): a root is never deleted while /dev or
# /sys of the host is bound into it, and rm never crosses into another file system.
unmount_under() {
  local m
  awk -v p="$1/" 'index($2 "/", p) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" || true; done
}
remove_root() {
  unmount_under "$1"
  rm -rf --one-file-system "$1"
}

root=""
cleanup() {
  [[ -n "$root" ]] || return 0
  unmount_under "$root"
  if [[ $keep -eq 0 ]]; then remove_root "$root"; fi
  root=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A new machine: a copy of the base with the checkout (tracked and untracked files that git
# does not ignore: a clean clone plus your uncommitted work) and the mounts a system has.
new_root() {
  root=$work/root
  remove_root "$root"
  cp -a "$base" "$root"
  mkdir -p "$root/root/opforge"
  # (A tracked file deleted in the work tree is not copied: a clean clone would have it.)
  git -C "$src" ls-files -z --cached --others --exclude-standard |
    tar -C "$src" --null -T - --ignore-failed-read -cf - 2>/dev/null |
    tar -C "$root/root/opforge" -xf -
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --bind /dev "$root/dev"
  mount --bind /dev/pts "$root/dev/pts"
  mount -t tmpfs tmpfs "$root/dev/shm"
  echo "fresh-check: new Debian 12 root $root"
}

run_in_root() {
  local name=$1 cmd=$2
  echo "fresh-check: $cmd (log $work/$name.log)"
  local t0=$SECONDS rc=0
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /root/opforge && $cmd" >"$work/$name.log" 2>&1 || rc=$?
  local s=$((SECONDS - t0))
  results+=("$(printf '%-22s exit %d  %d min %02d s' "$cmd" "$rc" $((s / 60)) $((s % 60)))")
  [[ $rc -eq 0 ]] || { failed=1; tail -30 "$work/$name.log" | sed 's/^/  | /'; }
  echo "fresh-check: ${results[-1]}"
}

results=() failed=0
make_base
[[ $base_only -eq 0 ]] || exit 0
if [[ -z "$only" || "$only" == regenerate ]]; then
  new_root
  run_in_root regenerate scripts/regenerate.sh
fi
if [[ -z "$only" || "$only" == test ]]; then
  [[ -n "$root" && $separate -eq 0 ]] || { cleanup; new_root; }
  run_in_root test scripts/test.sh
fi
cleanup
echo
how="one root"; [[ $separate -eq 0 ]] || how="a new root each"
echo "fresh-check summary ($how, Debian 12 minbase, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')):"
printf '  %s\n' "${results[@]}"
exit $failed
