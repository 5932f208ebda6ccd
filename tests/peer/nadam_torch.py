"""NAdam as torch 2.x's torch.optim.NAdam (_single_tensor_nadam, capturable=False), the reference of the peer tests'
NAdam checks: Debian's torch 1.13 computes mu_product_next as mu_product * mu * mu_next, counting mu twice (fixed in
torch 2.0), and has no decoupled_weight_decay (added in 2.1). Per step, each operation a separate tensor op as there:
the decay (p.mul_(1 - lr wd), or grad + wd p), mu and mu_next in Python floats, mu_product a float32 tensor multiplied
in place, exp_avg.lerp_, exp_avg_sq.mul_().addcmul_(), denom = sqrt(exp_avg_sq / bias_correction2) + eps, and the
two addcdiv_."""

import torch


class NAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
                 decoupled_weight_decay=False):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                                  "momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, psi, decoupled = group["weight_decay"], group["momentum_decay"], group["decoupled_weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["mu_product"] = torch.ones(())
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                grad = p.grad
                state["step"] += 1
                step = state["step"].item()
                bias_correction2 = 1 - beta2 ** step
                if wd != 0:
                    if decoupled:
                        p.mul_(1 - lr * wd)
                    else:
                        grad = grad.add(p, alpha=wd)
                mu = beta1 * (1. - 0.5 * (0.96 ** (step * psi)))
                mu_next = beta1 * (1. - 0.5 * (0.96 ** ((step + 1) * psi)))
                mu_product = state["mu_product"]
                mu_product *= mu
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt()
                mu_product_next = mu_product.item() * mu_next
                denom.add_(eps)
                p.addcdiv_(grad, denom, value=(-lr * (1. - mu) / (1. - mu_product.item())))
                p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1. - mu_product_next))
