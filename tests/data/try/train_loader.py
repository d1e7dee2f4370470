"""A small CPU training loop of the kind users write: a DataLoader without workers whose
per-sample augmentation (numpy) costs more than the model's step.

    python3 train_loader.py [EPOCHS]
"""

import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Augmented(Dataset):
    """Image-like samples, jittered, blurred and normalised one by one in numpy."""

    def __init__(self, n=512):
        rng = np.random.default_rng(0)
        self.raw = rng.standard_normal((n, 3, 32, 32)).astype(np.float32)
        self.labels = rng.integers(0, 10, n)

    def __len__(self):
        return len(self.raw)

    def __getitem__(self, i):
        x = self.raw[i]
        for _ in range(6):  # a few passes of a cheap blur, as an augmentation would
            x = (x + np.roll(x, 1, axis=1) + np.roll(x, 1, axis=2)) / 3.0
        x = (x - x.mean()) / (x.std() + 1e-6)
        return torch.from_numpy(x.astype(np.float32)), int(self.labels[i])


def main(epochs=2):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Augmented(), batch_size=32, shuffle=True, num_workers=0)
    for epoch in range(epochs):
        total = 0.0
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch}: loss {total / len(loader):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
