# sys.modules reached as an attribute of torch.
import torch

E = torch.sys.modules["andrea_course.pieces.attention"]
