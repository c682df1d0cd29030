"""ZeroOptimizer checkpoints in torch.optim's layout: per-parameter state tensors shaped like
their parameters, indexed over the groups in order, so a checkpoint moves between world
sizes and to and from opforge.torch.optim / torch.optim."""

import torch
import torch.distributed as dist


def _shard_keys(opt, gi):
    """The inner optimizer's state of group gi's shard: (sharded tensors, other values)."""
    shard = opt._shards[gi]
    state = opt._inner.state.get(shard, {})
    n = opt._parts[gi].shard_elems
    sharded = {k: v for k, v in state.items()
               if torch.is_tensor(v) and v.dim() == 1 and v.numel() == n}
    other = {k: v for k, v in state.items() if k not in sharded}
    return sharded, other


def _same(a, b):
    if torch.is_tensor(a) or torch.is_tensor(b):
        return torch.is_tensor(a) and torch.is_tensor(b) and torch.equal(a, b)
    return a == b


def _groups(opt):
    out, index = [], 0
    for group in opt.param_groups:
        g = {k: v for k, v in group.items() if k != "params"}
        g["params"] = list(range(index, index + len(group["params"])))
        index += len(group["params"])
        out.append(g)
    return out


def consolidate(opt, to):
    """Every rank's shards gathered to rank `to`, split per parameter there."""
    comm = opt._comm
    dst = opt._global_rank(to)
    state, index = {}, 0
    for gi, group in enumerate(opt.param_groups):
        part = opt._parts[gi]
        sharded, other = _shard_keys(opt, gi)
        if opt._onebit is not None and opt._onebit.compressing:
            full = opt._onebit.full_states(gi)  # whole on every rank
            other = dict(other, step=opt._onebit.step_value(gi))
        else:
            full = {}
            for key in sorted(sharded):
                comm.at(f"state_dict: gathering '{key}' of group {gi}")
                bufs = ([torch.empty(part.shard_elems) for _ in range(opt.world_size)]
                        if comm.rank == to else None)
                comm.run(lambda: dist.gather(sharded[key].contiguous(), bufs, dst=dst,
                                             group=opt._group),
                         f"the gather of state '{key}' to rank {to}")
                if comm.rank == to:
                    full[key] = part.flat_of(bufs)
        if comm.rank == to:
            for i, p in enumerate(group["params"]):
                entry = {}
                for key, value in other.items():
                    entry[key] = value.clone() if torch.is_tensor(value) else value
                for key, flat in full.items():
                    entry[key] = part.param_view(flat, i, p.shape).clone()
                if entry:
                    state[index + i] = entry
        index += len(group["params"])
    comm.at(f"between steps (step {opt._steps + 1} next)")
    if comm.rank != to:
        return None
    return {"state": state, "param_groups": _groups(opt)}


def load(opt, state_dict):
    """Checks state_dict against the optimizer's groups, then gives each group's shard its
    slice of every state (through the inner optimizer's own load_state_dict)."""
    groups = state_dict.get("param_groups")
    if not isinstance(groups, list) or len(groups) != len(opt.param_groups):
        raise ValueError(f"ZeroOptimizer.load_state_dict: the state dict has "
                         f"{len(groups) if isinstance(groups, list) else 'no'} param groups, "
                         f"the optimizer {len(opt.param_groups)}")
    saved_state = state_dict.get("state", {})
    inner_state, inner_groups, pending = {}, [], []
    for gi, (group, saved) in enumerate(zip(opt.param_groups, groups)):
        ids = saved["params"]
        if len(ids) != len(group["params"]):
            raise ValueError(f"ZeroOptimizer.load_state_dict: group {gi} has {len(ids)} "
                             f"parameters in the state dict, {len(group['params'])} here")
        part = opt._parts[gi]
        entries = [saved_state.get(k) for k in ids]
        present = [e for e in entries if e]
        shard_state = {}
        if present:
            if len(present) != len(entries):
                raise ValueError(f"ZeroOptimizer.load_state_dict: group {gi} has state for "
                                 f"{len(present)} of its {len(entries)} parameters; a sharded "
                                 "step updates all of them or none")
            for key in present[0]:
                values = [e.get(key) for e in entries]
                if key != "step" and all(torch.is_tensor(v) and v.shape == p.shape
                                         for v, p in zip(values, group["params"])):
                    flat = torch.zeros(part.total)
                    for i, v in enumerate(values):
                        part.param_view(flat, i, group["params"][i].shape).copy_(v)
                    shard_state[key] = part.shard_of(flat, opt.rank)
                else:
                    first = values[0]
                    if not all(_same(v, first) for v in values):
                        raise ValueError(f"ZeroOptimizer.load_state_dict: group {gi}'s "
                                         f"parameters differ in '{key}'; a shard steps them "
                                         "together")
                    shard_state[key] = first.clone() if torch.is_tensor(first) else first
        inner_state[gi] = shard_state
        inner_groups.append(dict({k: v for k, v in saved.items() if k != "params"},
                                 params=[gi]))
        pending.append({k: v for k, v in saved.items() if k != "params"})
    opt._inner.load_state_dict({"state": {k: v for k, v in inner_state.items() if v},
                                "param_groups": inner_groups})
    for group, saved in zip(opt.param_groups, pending):
        group.update(saved)
    if opt._onebit is not None:
        opt._onebit.loaded()
