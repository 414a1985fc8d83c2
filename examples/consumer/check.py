"""Which img2gray build did the solver pick, and does it compute BT.601 grayscale on this machine?"""

import torch

import img2gray

build = img2gray.metadata()
device = "cuda" if build["backend"]["type"] == "cuda" and torch.cuda.is_available() else "cpu"
x = torch.rand(4, 3, 256, 256, device=device)
r, g, b = x.double().unbind(1)
torch.testing.assert_close(torch.ops.img2gray.img2gray(x).double(), (0.299 * r + 0.587 * g + 0.114 * b).unsqueeze(1))
print(f"img2gray {build['version']} [{build['variant']}] from {img2gray.__file__}: {device} result matches BT.601")
