"""The checks that 8-bit states' settings and bitsandbytes' arguments share, wherever they
are given: optimizer constructors, param groups, bitsandbytes' class names and
GlobalOptimManager overrides."""

# bitsandbytes' arguments opforge does not implement, at the values that change nothing, and
# what another value would ask for.
DO_NOTHING = {
    "percentile_clipping": (100, "only 100: no clipping"),
    "block_wise": (True, "one absmax per tensor; the 8-bit kernels quantize in blocks of 256"),
    "max_unorm": (0, "only 0: no update-norm clipping"),
}


def check_min_8bit_size(value, where):
    """`where` prefixes the message ("" or "NAME: ...")."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}min_8bit_size must be an int >= 0, got {value!r}")


def check_do_nothing(key, value, where):
    """A bitsandbytes argument of DO_NOTHING at a value that changes nothing (block_wise:
    any true value); a ValueError naming it otherwise."""
    default, why = DO_NOTHING[key]
    if not (bool(value) if key == "block_wise" else value == default):
        raise ValueError(f"{where}{key}={value!r} is not implemented ({why})")
