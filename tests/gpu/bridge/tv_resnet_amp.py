"""torchvision's ResNet-152 (random weights) trained in a plain loop with
fp16 autocast and a GradScaler, SGD with momentum, on random 224x224 images
of 1000 classes. `--device cpu --model resnet18 --size 32 --batch 2` runs it
on the CPU (autocast and the scaler off there) as a quick check."""
import argparse
import atexit
import time

import torch
import torch.nn.functional as F
import torchvision

import step_report   # beside this script


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet152", help="a torchvision ResNet: resnet18/34/50/101/152")
    ap.add_argument("--batch", type=int, default=384)
    ap.add_argument("--size", type=int, default=224, help="image height and width")
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--report", default="", help="write a JSON of step times and torch's own peak here")
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    model = getattr(torchvision.models, a.model)(weights=None, num_classes=a.classes).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)
    if cuda and hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler("cuda")
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=cuda)
    g = torch.Generator(device=dev)
    g.manual_seed(1)
    times = []
    if a.report:    # at exit too: memsplit stops a trial inside the last step's optimizer
        atexit.register(lambda: step_report.write(a.report, times))
    model.train()
    for step in range(a.steps):
        sync(cuda)
        t0 = time.perf_counter()
        x = torch.randn(a.batch, 3, a.size, a.size, device=dev, generator=g)
        y = torch.randint(0, a.classes, (a.batch,), device=dev, generator=g)
        with torch.autocast("cuda", dtype=torch.float16, enabled=cuda):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        lv = loss.item()
        sync(cuda)
        times.append((time.perf_counter() - t0) * 1e3)
        print("step %d loss %.4f ms %.2f" % (step, lv, times[-1]), flush=True)
        if a.report:
            step_report.write(a.report, times)


def sync(cuda):
    if cuda:
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
