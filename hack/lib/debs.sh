# shellcheck shell=bash
# Root filesystems from Debian's .deb files, for the images of hack/image.sh (kproxy's)
# and hack/cluster-images.sh (the test cluster's). Sourced; the caller has `set -euo
# pipefail`, runs as root (the checks chroot), and has cd'ed to the repository root.
#
#   debs_closure PKG...      the packages a rootfs of PKG... holds, one a line, sorted
#   debs_uris PKG...         "FILE SHA256" of each package's .deb (apt's candidates)
#   debs_manifest PKG...     debs_uris of the closure (cached): the inputs, for a stamp
#   debs_rootfs DIR PKG...   DIR emptied, then the closure's .deb files extracted and trimmed
#   debs_alternative DIR LINK TARGET   a name in Debian's update-alternatives layout
#   debs_iptables_alternatives DIR     iptables and ip6tables (and -save, -restore) -> nft
#   debs_check_elf DIR       every ELF file under DIR resolves its libraries inside DIR
#   debs_tool                DEBS_TOOL: cmd/kproxy-image, built
#   debs_smoke DIR CMD...    CMD run chrooted in DIR (private mount and network namespaces)
#
# The closure is what apt would install for PKG... with no recommends or suggests:
# Depends and Pre-Depends, recursively, the first alternative of an "a | b" unless
# another is already taken, a virtual package by its first provider (or one in
# DEBS_PREFER). The packages in DEBS_EXCLUDE (a space-separated list) are not taken,
# nor what only they need: the ones that only run maintainer scripts and package
# management, which an image extracted with dpkg-deb -x never runs (debconf, dpkg,
# perl through usrmerge).
#
# The .deb files are cached in DEBS_CACHE (default _output/image/debs) by version: apt
# names each candidate's file (name_version_arch.deb) and its checksum; a file is
# downloaded only when missing or not matching. dpkg-deb -x does not run maintainer
# scripts, so what those would create (alternatives, /etc/passwd, /bin/sh for dash's
# diversion...) is the caller's, with the helpers below.

DEBS_CACHE=${DEBS_CACHE:-_output/image/debs}
DEBS_EXCLUDE=${DEBS_EXCLUDE:-debconf cdebconf dpkg install-info init-system-helpers usrmerge usr-is-merged perl-base}
# Providers of a virtual package taken before the others (awk: Debian's default, mawk).
DEBS_PREFER=${DEBS_PREFER:-mawk}
# Paths (relative to the rootfs, globs) that debs_rootfs removes besides the documentation.
DEBS_REMOVE=()
DEBS_LOADER=/lib64/ld-linux-x86-64.so.2
DEBS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# apt's binary cache of the package lists, kept in _output: the machine's apt
# configuration (Debian's container images) may disable it, and without it every apt
# call parses the lists again (a second or more each).
DEBS_APT=(-o Dir::Cache::pkgcache="$PWD/_output/image/apt/pkgcache.bin")
mkdir -p _output/image/apt

# debs_apt_ready PKG...: apt's lists are present (apt-get update once, on a fresh machine).
debs_apt_ready() {
  if ! apt-cache "${DEBS_APT[@]}" show "$@" >/dev/null 2>&1; then
    apt-get update -qq
  fi
}

# debs_closure PKG...: see above. One apt-cache call lists every package reachable
# through any alternative, with its dependency groups; the walk from PKG... picks.
debs_closure() {
  debs_apt_ready "$@"
  local -A deps=() taken=() excluded=() preferred=()
  local p line dep pkg="" group="" open="" virtual=""
  for p in $DEBS_EXCLUDE; do excluded[$p]=1; done
  for p in $DEBS_PREFER; do preferred[$p]=1; done
  # deps[PKG]: its groups separated by spaces, a group's alternatives by "|", a
  # virtual alternative as <name>=provider,provider.
  while IFS= read -r line; do
    case $line in
      " |Depends: "* | "  Depends: "* | " |PreDepends: "* | "  PreDepends: "*)
        dep=${line#*: }
        virtual=""
        if [[ $dep = "<"*">" ]]; then # virtual; an architecture qualifier (perl:any) goes
          dep=${dep#<} dep=${dep%>} dep="<${dep%%:*}>=" virtual=1
        else
          dep=${dep%%:*}
        fi
        if [ -n "$open" ]; then group+="|$dep"; else group+=" $dep"; fi
        if [ "${line:1:1}" = "|" ]; then open=1; else open=""; fi
        ;;
      "    "*) # a provider: of a virtual package (a real one's are not needed)
        [ -z "$virtual" ] || group+="${line#    },"
        ;;
      " "*) ;;
      *)
        [ -z "$pkg" ] || deps[$pkg]=$group
        pkg=$line group="" open=""
        ;;
    esac
  done < <(apt-cache "${DEBS_APT[@]}" depends --recurse --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances "$@")
  [ -z "$pkg" ] || deps[$pkg]=$group

  local -a queue=("$@") next alts provs
  local g a pick prov
  for p in "$@"; do taken[$p]=1; done
  while [ ${#queue[@]} -gt 0 ]; do
    next=()
    for p in "${queue[@]}"; do
      for g in ${deps[$p]:-}; do
        IFS='|' read -r -a alts <<<"$g"
        pick=""
        for a in "${alts[@]}"; do # already satisfied?
          if [[ $a = "<"* ]]; then
            IFS=, read -r -a provs <<<"${a#*=}"
            for prov in "${provs[@]}"; do
              [ -n "${taken[$prov]:-}" ] && pick=-
            done
          elif [ -n "${taken[$a]:-}" ]; then
            pick=-
          fi
        done
        [ -z "$pick" ] || continue
        for a in "${alts[@]}"; do
          if [[ $a != "<"* ]]; then
            [ -z "${excluded[$a]:-}" ] && { pick=$a; break; }
            continue
          fi
          IFS=, read -r -a provs <<<"${a#*=}"
          for prov in "${provs[@]}"; do
            [ -n "${preferred[$prov]:-}" ] && { pick=$prov; break 2; }
          done
          for prov in "${provs[@]}"; do
            [ -z "${excluded[$prov]:-}" ] && { pick=$prov; break 2; }
          done
        done
        [ -n "$pick" ] || continue
        taken[$pick]=1
        next+=("$pick")
      done
    done
    queue=("${next[@]}")
  done
  printf '%s\n' "${!taken[@]}" | LC_ALL=C sort
}

# debs_uris PKG...: the .deb file of each package (apt's candidate) and its SHA256.
debs_uris() {
  local file sum
  while read -r _ file _ sum; do
    echo "$file ${sum#SHA256:}"
  done < <(apt-get "${DEBS_APT[@]}" download --print-uris "$@")
}

# debs_manifest PKG...: debs_uris of debs_closure PKG..., "FILE SHA256" a line: what a
# rootfs of PKG... is made of, for the callers' stamps. Cached in _output/image/apt
# while apt's lists, DEBS_EXCLUDE, DEBS_PREFER and this file are unchanged.
debs_manifest() {
  local key cache
  key=$({
    echo "$* | $DEBS_EXCLUDE | $DEBS_PREFER"
    cat "${BASH_SOURCE[0]}"
    find /var/lib/apt/lists /etc/apt -maxdepth 2 -type f -printf '%p %s %T@\n' 2>/dev/null | sort
  } | sha256sum | cut -d' ' -f1)
  cache=_output/image/apt/manifest-$key
  if ! [ -s "$cache" ]; then
    local -a pkgs
    mapfile -t pkgs < <(debs_closure "$@")
    debs_uris "${pkgs[@]}" > "$cache.tmp"
    [ "$(wc -l < "$cache.tmp")" = ${#pkgs[@]} ] || { echo "debs: apt named no file for some of ${pkgs[*]}" >&2; return 1; }
    mv -f "$cache.tmp" "$cache"
  fi
  cat "$cache"
}

# debs_fetch PKG...: the .deb files of PKG... in DEBS_CACHE, checked; prints their paths.
debs_fetch() {
  mkdir -p "$DEBS_CACHE"
  local -a missing=() files=()
  local file sum f
  while read -r file sum; do
    f="$DEBS_CACHE/$file"
    files+=("$f")
    if ! [ -f "$f" ] || [ "$(sha256sum "$f" | cut -d' ' -f1)" != "$sum" ]; then
      missing+=("${file%%_*}")
    fi
  done < <(debs_uris "$@")
  if [ ${#files[@]} != $# ]; then
    echo "debs: apt named ${#files[@]} files for $# packages" >&2
    return 1
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    echo "debs: downloading ${missing[*]}" >&2
    (cd "$DEBS_CACHE" && apt-get "${DEBS_APT[@]}" download -qq -o APT::Sandbox::User=root "${missing[@]}") >&2
  fi
  printf '%s\n' "${files[@]}"
}

# debs_rootfs DIR PKG...: DIR holds the closure of PKG..., extracted, without what no
# image uses: documentation, translations, service units and init scripts, iconv
# modules, and DEBS_REMOVE; empty directories are removed.
debs_rootfs() {
  local dir=$1; shift
  local -a pkgs files
  mapfile -t pkgs < <(debs_closure "$@")
  mapfile -t files < <(debs_fetch "${pkgs[@]}")
  echo "debs: ${#pkgs[@]} packages: ${pkgs[*]}" >&2
  rm -rf "$dir"
  mkdir -p "$dir"
  local f
  for f in "${files[@]}"; do
    dpkg-deb -x "$f" "$dir"
  done
  rm -rf "$dir"/usr/share/{doc,doc-base,man,info,lintian,bug,locale,bash-completion,zsh,gcc} \
    "$dir"/{lib,usr/lib}/systemd "$dir"/etc/init.d "$dir"/usr/lib/x86_64-linux-gnu/gconv
  local p
  for p in "${DEBS_REMOVE[@]}"; do
    # shellcheck disable=SC2086 # p is a glob
    rm -rf "$dir"/$p
  done
  find "$dir" -depth -type d -empty -delete
}

# debs_alternative DIR LINK TARGET: LINK -> /etc/alternatives/NAME -> TARGET, as
# update-alternatives leaves them (NAME is LINK's base name); relinking
# /etc/alternatives/NAME switches it.
debs_alternative() {
  local dir=$1 link=$2 target=$3
  local name=${link##*/}
  mkdir -p "$dir/etc/alternatives" "$dir${link%/*}"
  ln -sfn "$target" "$dir/etc/alternatives/$name"
  ln -sfn "/etc/alternatives/$name" "$dir$link"
}

# debs_iptables_alternatives DIR: iptables, ip6tables and their -save/-restore in
# Debian's update-alternatives layout (/usr/sbin/iptables -> /etc/alternatives/iptables
# -> /usr/sbin/iptables-nft), set to the nft back end; the explicit iptables-nft-* and
# iptables-legacy-* names are the package's own.
debs_iptables_alternatives() {
  local dir=$1 fam tool
  for fam in iptables ip6tables; do
    for tool in "" -save -restore; do
      debs_alternative "$dir" "/usr/sbin/$fam$tool" "/usr/sbin/$fam-nft$tool"
    done
  done
}

# debs_tool: DEBS_TOOL is cmd/kproxy-image, built (once per shell; call it outside $(...)).
debs_tool() {
  if [ -z "${DEBS_TOOL:-}" ]; then
    go build -o _output/bin/kproxy-image ./cmd/kproxy-image
    DEBS_TOOL=_output/bin/kproxy-image
  fi
}

# debs_check_elf DIR: every dynamically linked ELF file under DIR (executables, shared
# libraries, dlopened modules such as the xtables extensions, which running the tools
# would not catch) resolves its libraries inside DIR: its loader's --list, chrooted,
# names no missing library. Static ones (Go's, busybox-static) need nothing.
debs_check_elf() {
  local dir=$1 rel interp listing bad=0 n=0
  debs_tool
  while read -r rel interp; do
    [[ $rel = */ld-linux-x86-64.so.2 ]] && continue
    [ "$interp" = - ] && interp=$DEBS_LOADER
    n=$((n + 1))
    if ! listing=$(chroot "$dir" "$interp" --list "$rel" 2>&1) || grep -q 'not found' <<<"$listing"; then
      echo "debs: $rel: unresolved libraries: $listing" >&2
      bad=1
    fi
  done < <("$DEBS_TOOL" dynamic --root "$dir")
  [ "$bad" = 0 ] || return 1
  echo "debs: $n dynamically linked files resolve their libraries in the tree" >&2
}

# debs_smoke DIR CMD...: CMD run chrooted in DIR with a clean environment, in a
# private mount namespace (with DEBS_SMOKE_DEV=1, /dev and, in a new PID namespace,
# /proc mounted there for the command, gone with the namespace) and a new, empty
# network namespace (nothing it does reaches a network); prints the start of its
# output, or fails with all of it.
debs_smoke() {
  local dir=$1; shift
  local got
  if [ "${DEBS_SMOKE_DEV:-}" = 1 ]; then
    mkdir -p "$dir/dev" "$dir/proc"
    # shellcheck disable=SC2016 # expanded by the inner shell
    got=$(env -i PATH="$DEBS_PATH" unshare --mount --propagation private --net --pid --fork sh -c \
      'd=$1; shift; mount --bind /dev "$d/dev" && mount -t proc proc "$d/proc" && exec chroot "$d" "$@"' \
      sh "$dir" "$@" 2>&1) || { echo "smoke test failed: $*: $got" >&2; return 1; }
  else
    got=$(env -i PATH="$DEBS_PATH" unshare --mount --net --fork chroot "$dir" "$@" 2>&1) ||
      { echo "smoke test failed: $*: $got" >&2; return 1; }
  fi
  got=$(head -3 <<<"$got" | tr '\n\t' '  ')
  echo "  $*: ${got:0:150}"
}
