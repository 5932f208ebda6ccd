"""Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2) as a torch.optim.Optimizer,
the reference of the peer tests' Lion checks (PyTorch has no Lion): per element, c = beta1 m + (1 - beta1) g;
p = p (1 - lr wd) - lr sign(c); m = beta2 m + (1 - beta2) g, each step's operations as separate tensor ops."""

import torch


class Lion(torch.optim.Optimizer):
    def __init__(self, params, lr, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, (beta1, beta2), wd = group["lr"], group["betas"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m = self.state[p].setdefault("exp_avg", torch.zeros_like(p))
                interpolated = m * beta1 + p.grad * (1 - beta1)
                p.mul_(1 - lr * wd)
                p.add_(interpolated.sign(), alpha=-lr)
                m.mul_(beta2).add_(p.grad, alpha=1 - beta2)
