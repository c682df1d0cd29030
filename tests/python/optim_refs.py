"""Plain fp64-capable references, written from the published formulas, for the optimizers
without a torch.optim class (torch.optim.Optimizer subclasses, so param groups, StepLR and
state_dict work on them as on torch's own)."""

import torch


class RefLion(torch.optim.Optimizer):
    """google/automl lion_pytorch.py: p *= 1 - lr*wd; p -= lr*sign(b1*m + (1-b1)*g);
    m = b2*m + (1-b2)*g."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd, (b1, b2) = group["lr"], group["weight_decay"], group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m = self.state[p].setdefault("exp_avg", torch.zeros_like(p))
                p.mul_(1 - lr * wd)
                p.add_(torch.sign(m * b1 + p.grad * (1 - b1)), alpha=-lr)
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


class RefLAMB(torch.optim.Optimizer):
    """tfa.optimizers.LAMB (_resource_apply_dense), no exclusions:
    u = m_hat / (sqrt(v_hat) + eps) + wd*p; p -= lr * (||p|| / ||u|| if both > 0 else 1) * u."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd, eps, (b1, b2) = (group["lr"], group["weight_decay"], group["eps"],
                                     group["betas"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                s = self.state[p]
                if not s:
                    s.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                s["step"] += 1
                t, g = s["step"], p.grad
                s["exp_avg"].mul_(b1).add_(g, alpha=1 - b1)
                s["exp_avg_sq"].mul_(b2).add_(g * g, alpha=1 - b2)
                m_hat = s["exp_avg"] / (1 - b1 ** t)
                v_hat = s["exp_avg_sq"] / (1 - b2 ** t)
                u = m_hat / (v_hat.sqrt() + eps) + wd * p
                w_norm, u_norm = p.norm().item(), u.norm().item()
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
                p.add_(u, alpha=-lr * ratio)


class RefSignSqrtMomentum(torch.optim.Optimizer):
    """generators/rules/sign_sqrt_momentum.rule (updates simultaneous, so var moves by the
    old m): g = sign(grad)*sqrt(|grad|); var -= lr*m; m = beta*m + (1-beta)*g."""

    def __init__(self, params, lr=0.01, beta=0.9):
        super().__init__(params, dict(lr=lr, beta=beta))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, beta = group["lr"], group["beta"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m = self.state[p].setdefault("m", torch.zeros_like(p))
                g = torch.sign(p.grad) * p.grad.abs().sqrt()
                p.add_(m, alpha=-lr)
                m.mul_(beta).add_(g, alpha=1 - beta)


class RefTFAdam(torch.optim.Optimizer):
    """generators/rules/adam_rule.rule (TensorFlow's ApplyAdam): m = b1*m + (1-b1)*g;
    v = b2*v + (1-b2)*g^2; var -= lr*sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-7):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, eps, (b1, b2) = group["lr"], group["eps"], group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                s = self.state[p]
                if not s:
                    s.update(step=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                s["step"] += 1
                t, g = s["step"], p.grad
                s["m"].mul_(b1).add_(g, alpha=1 - b1)
                s["v"].mul_(b2).add_(g * g, alpha=1 - b2)
                lr_t = lr * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t)
                p.sub_(lr_t * s["m"] / (s["v"].sqrt() + eps))


class RefLARS(torch.optim.Optimizer):
    """TensorFlow contrib LARSOptimizer (r1.15 lars_optimizer.py), no skip_list: compute_lr
    gives trust = eta*||p||/(||g|| + wd*||p|| + eps) if ||p|| > 0 and ||g|| > 0 else 1 (raw
    gradient) and g' = g + wd*p; then ApplyMomentum(p, buf, lr=1, g'*lr*trust, momentum):
    buf = momentum*buf + g'*lr*trust; p -= buf (nesterov: p -= g'*lr*trust + momentum*buf)."""

    def __init__(self, params, lr, momentum=0.9, weight_decay=1e-4, eta=1e-3, epsilon=0.0,
                 nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      eta=eta, epsilon=epsilon, nesterov=nesterov))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, mom, wd, eta, eps = (group["lr"], group["momentum"], group["weight_decay"],
                                     group["eta"], group["epsilon"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                w_norm, g_norm = p.norm().item(), p.grad.norm().item()
                trust = eta * w_norm / (g_norm + wd * w_norm + eps) \
                    if w_norm > 0 and g_norm > 0 else 1.0
                u = (p.grad + wd * p) * (lr * trust)
                buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                buf.mul_(mom).add_(u)
                p.sub_(u + mom * buf if group["nesterov"] else buf)
