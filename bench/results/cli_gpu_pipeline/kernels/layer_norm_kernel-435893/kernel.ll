; ModuleID = 'LLVMDialectModule'
source_filename = "LLVMDialectModule"
target datalayout = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"

@global_smem = external addrspace(3) global [0 x i8], align 16
@.str = private unnamed_addr constant [11 x i8] c"__CUDA_FTZ\00", align 1

; Function Attrs: nounwind
define ptx_kernel void @layer_norm_kernel(ptr addrspace(1) %0, ptr addrspace(1) %1, ptr addrspace(1) %2, ptr addrspace(1) %3, ptr addrspace(1) readnone captures(none) %4, ptr addrspace(1) readnone captures(none) %5) local_unnamed_addr #0 !dbg !4 {
__nv_rsqrtf.exit:
  %6 = tail call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x(), !dbg !7
  %7 = shl i32 %6, 12, !dbg !8
  %8 = sext i32 %7 to i64, !dbg !9
  %9 = getelementptr float, ptr addrspace(1) %0, i64 %8, !dbg !9
  %10 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x(), !dbg !10
  %11 = and i32 %10, 255, !dbg !10
  %12 = and i32 %10, 31, !dbg !10
  %13 = lshr i32 %11, 5, !dbg !10
  %14 = shl nuw nsw i32 %10, 2, !dbg !10
  %15 = and i32 %14, 1020, !dbg !10
  %16 = or disjoint i32 %15, 1024, !dbg !10
  %17 = or disjoint i32 %15, 2048, !dbg !10
  %18 = or i32 %14, 3072, !dbg !10
  %19 = zext nneg i32 %15 to i64, !dbg !11
  %20 = getelementptr float, ptr addrspace(1) %9, i64 %19, !dbg !11
  %21 = zext nneg i32 %16 to i64, !dbg !11
  %22 = getelementptr float, ptr addrspace(1) %9, i64 %21, !dbg !11
  %23 = zext nneg i32 %17 to i64, !dbg !11
  %24 = getelementptr float, ptr addrspace(1) %9, i64 %23, !dbg !11
  %25 = zext nneg i32 %18 to i64, !dbg !11
  %26 = getelementptr float, ptr addrspace(1) %9, i64 %25, !dbg !11
  %27 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %20) #6, !dbg !12
  %28 = extractvalue { i32, i32, i32, i32 } %27, 0, !dbg !12
  %29 = extractvalue { i32, i32, i32, i32 } %27, 1, !dbg !12
  %30 = extractvalue { i32, i32, i32, i32 } %27, 2, !dbg !12
  %31 = extractvalue { i32, i32, i32, i32 } %27, 3, !dbg !12
  %32 = bitcast i32 %28 to float, !dbg !12
  %33 = bitcast i32 %29 to float, !dbg !12
  %34 = bitcast i32 %30 to float, !dbg !12
  %35 = bitcast i32 %31 to float, !dbg !12
  %36 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %22) #6, !dbg !12
  %37 = extractvalue { i32, i32, i32, i32 } %36, 0, !dbg !12
  %38 = extractvalue { i32, i32, i32, i32 } %36, 1, !dbg !12
  %39 = extractvalue { i32, i32, i32, i32 } %36, 2, !dbg !12
  %40 = extractvalue { i32, i32, i32, i32 } %36, 3, !dbg !12
  %41 = bitcast i32 %37 to float, !dbg !12
  %42 = bitcast i32 %38 to float, !dbg !12
  %43 = bitcast i32 %39 to float, !dbg !12
  %44 = bitcast i32 %40 to float, !dbg !12
  %45 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %24) #6, !dbg !12
  %46 = extractvalue { i32, i32, i32, i32 } %45, 0, !dbg !12
  %47 = extractvalue { i32, i32, i32, i32 } %45, 1, !dbg !12
  %48 = extractvalue { i32, i32, i32, i32 } %45, 2, !dbg !12
  %49 = extractvalue { i32, i32, i32, i32 } %45, 3, !dbg !12
  %50 = bitcast i32 %46 to float, !dbg !12
  %51 = bitcast i32 %47 to float, !dbg !12
  %52 = bitcast i32 %48 to float, !dbg !12
  %53 = bitcast i32 %49 to float, !dbg !12
  %54 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %26) #6, !dbg !12
  %55 = extractvalue { i32, i32, i32, i32 } %54, 0, !dbg !12
  %56 = extractvalue { i32, i32, i32, i32 } %54, 1, !dbg !12
  %57 = extractvalue { i32, i32, i32, i32 } %54, 2, !dbg !12
  %58 = extractvalue { i32, i32, i32, i32 } %54, 3, !dbg !12
  %59 = bitcast i32 %55 to float, !dbg !12
  %60 = bitcast i32 %56 to float, !dbg !12
  %61 = bitcast i32 %57 to float, !dbg !12
  %62 = bitcast i32 %58 to float, !dbg !12
  %63 = fadd float %32, %33, !dbg !13
  %64 = fadd float %63, %34, !dbg !13
  %65 = fadd float %64, %35, !dbg !13
  %66 = fadd float %65, %41, !dbg !13
  %67 = fadd float %66, %42, !dbg !13
  %68 = fadd float %67, %43, !dbg !13
  %69 = fadd float %68, %44, !dbg !13
  %70 = fadd float %69, %50, !dbg !13
  %71 = fadd float %70, %51, !dbg !13
  %72 = fadd float %71, %52, !dbg !13
  %73 = fadd float %72, %53, !dbg !13
  %74 = fadd float %73, %59, !dbg !13
  %75 = fadd float %74, %60, !dbg !13
  %76 = fadd float %75, %61, !dbg !13
  %77 = fadd float %76, %62, !dbg !13
  %78 = bitcast float %77 to i32, !dbg !16
  %79 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %78, i32 16, i32 31), !dbg !16
  %80 = bitcast i32 %79 to float, !dbg !16
  %81 = fadd float %77, %80, !dbg !13
  %82 = bitcast float %81 to i32, !dbg !16
  %83 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %82, i32 8, i32 31), !dbg !16
  %84 = bitcast i32 %83 to float, !dbg !16
  %85 = fadd float %81, %84, !dbg !13
  %86 = bitcast float %85 to i32, !dbg !16
  %87 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %86, i32 4, i32 31), !dbg !16
  %88 = bitcast i32 %87 to float, !dbg !16
  %89 = fadd float %85, %88, !dbg !13
  %90 = bitcast float %89 to i32, !dbg !16
  %91 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %90, i32 2, i32 31), !dbg !16
  %92 = bitcast i32 %91 to float, !dbg !16
  %93 = fadd float %89, %92, !dbg !13
  %94 = bitcast float %93 to i32, !dbg !16
  %95 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %94, i32 1, i32 31), !dbg !16
  %96 = bitcast i32 %95 to float, !dbg !16
  %97 = fadd float %93, %96, !dbg !13
  %98 = icmp eq i32 %12, 0, !dbg !16
  %99 = getelementptr float, ptr addrspace(3) @global_smem, i32 %13, !dbg !16
  %100 = bitcast float %97 to <1 x i32>, !dbg !16
  tail call void asm sideeffect "@$2 st.shared.b32 [ $0 + 0 ], $1;", "r,r,b"(ptr addrspace(3) %99, <1 x i32> %100, i1 %98) #6, !dbg !16
  tail call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0), !dbg !16
  %101 = icmp samesign ult i32 %11, 8, !dbg !16
  %102 = getelementptr float, ptr addrspace(3) @global_smem, i32 %11, !dbg !16
  %103 = tail call i32 asm sideeffect "@$2 ld.shared.b32 $0, [ $1 + 0 ];", "=r,r,b"(ptr addrspace(3) %102, i1 %101) #6, !dbg !16
  %104 = bitcast i32 %103 to float, !dbg !16
  %105 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %103, i32 4, i32 31), !dbg !16
  %106 = bitcast i32 %105 to float, !dbg !16
  %107 = fadd float %104, %106, !dbg !13
  %108 = bitcast float %107 to i32, !dbg !16
  %109 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %108, i32 2, i32 31), !dbg !16
  %110 = bitcast i32 %109 to float, !dbg !16
  %111 = fadd float %107, %110, !dbg !13
  %112 = bitcast float %111 to i32, !dbg !16
  %113 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %112, i32 1, i32 31), !dbg !16
  %114 = bitcast i32 %113 to float, !dbg !16
  %115 = fadd float %111, %114, !dbg !13
  %116 = and i32 %10, 7, !dbg !16
  %117 = icmp eq i32 %116, 0, !dbg !16
  %118 = and i1 %101, %117, !dbg !16
  %119 = bitcast float %115 to <1 x i32>, !dbg !16
  tail call void asm sideeffect "@$2 st.shared.b32 [ $0 + 0 ], $1;", "r,r,b"(ptr addrspace(3) %102, <1 x i32> %119, i1 %118) #6, !dbg !16
  tail call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0), !dbg !16
  %120 = load float, ptr addrspace(3) @global_smem, align 16, !dbg !16
  %121 = tail call float @llvm.nvvm.div.full(float %120, float 4.096000e+03), !dbg !19
  %122 = fsub float %32, %121, !dbg !20
  %123 = fsub float %33, %121, !dbg !20
  %124 = fsub float %34, %121, !dbg !20
  %125 = fsub float %35, %121, !dbg !20
  %126 = fsub float %41, %121, !dbg !20
  %127 = fsub float %42, %121, !dbg !20
  %128 = fsub float %43, %121, !dbg !20
  %129 = fsub float %44, %121, !dbg !20
  %130 = fsub float %50, %121, !dbg !20
  %131 = fsub float %51, %121, !dbg !20
  %132 = fsub float %52, %121, !dbg !20
  %133 = fsub float %53, %121, !dbg !20
  %134 = fsub float %59, %121, !dbg !20
  %135 = fsub float %60, %121, !dbg !20
  %136 = fsub float %61, %121, !dbg !20
  %137 = fsub float %62, %121, !dbg !20
  %138 = fmul float %122, %122, !dbg !21
  %139 = fmul float %123, %123, !dbg !21
  %140 = fmul float %124, %124, !dbg !21
  %141 = fmul float %125, %125, !dbg !21
  %142 = fmul float %126, %126, !dbg !21
  %143 = fmul float %127, %127, !dbg !21
  %144 = fmul float %128, %128, !dbg !21
  %145 = fmul float %129, %129, !dbg !21
  %146 = fmul float %130, %130, !dbg !21
  %147 = fmul float %131, %131, !dbg !21
  %148 = fmul float %132, %132, !dbg !21
  %149 = fmul float %133, %133, !dbg !21
  %150 = fmul float %134, %134, !dbg !21
  %151 = fmul float %135, %135, !dbg !21
  %152 = fmul float %136, %136, !dbg !21
  %153 = fmul float %137, %137, !dbg !21
  tail call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0), !dbg !22
  %154 = fadd float %138, %139, !dbg !24
  %155 = fadd float %140, %154, !dbg !24
  %156 = fadd float %141, %155, !dbg !24
  %157 = fadd float %142, %156, !dbg !24
  %158 = fadd float %143, %157, !dbg !24
  %159 = fadd float %144, %158, !dbg !24
  %160 = fadd float %145, %159, !dbg !24
  %161 = fadd float %146, %160, !dbg !24
  %162 = fadd float %147, %161, !dbg !24
  %163 = fadd float %148, %162, !dbg !24
  %164 = fadd float %149, %163, !dbg !24
  %165 = fadd float %150, %164, !dbg !24
  %166 = fadd float %151, %165, !dbg !24
  %167 = fadd float %152, %166, !dbg !24
  %168 = fadd float %153, %167, !dbg !24
  %169 = bitcast float %168 to i32, !dbg !22
  %170 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %169, i32 16, i32 31), !dbg !22
  %171 = bitcast i32 %170 to float, !dbg !22
  %172 = fadd float %168, %171, !dbg !24
  %173 = bitcast float %172 to i32, !dbg !22
  %174 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %173, i32 8, i32 31), !dbg !22
  %175 = bitcast i32 %174 to float, !dbg !22
  %176 = fadd float %172, %175, !dbg !24
  %177 = bitcast float %176 to i32, !dbg !22
  %178 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %177, i32 4, i32 31), !dbg !22
  %179 = bitcast i32 %178 to float, !dbg !22
  %180 = fadd float %176, %179, !dbg !24
  %181 = bitcast float %180 to i32, !dbg !22
  %182 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %181, i32 2, i32 31), !dbg !22
  %183 = bitcast i32 %182 to float, !dbg !22
  %184 = fadd float %180, %183, !dbg !24
  %185 = bitcast float %184 to i32, !dbg !22
  %186 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %185, i32 1, i32 31), !dbg !22
  %187 = bitcast i32 %186 to float, !dbg !22
  %188 = fadd float %184, %187, !dbg !24
  %189 = bitcast float %188 to <1 x i32>, !dbg !22
  tail call void asm sideeffect "@$2 st.shared.b32 [ $0 + 0 ], $1;", "r,r,b"(ptr addrspace(3) %99, <1 x i32> %189, i1 %98) #6, !dbg !22
  tail call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0), !dbg !22
  %190 = tail call i32 asm sideeffect "@$2 ld.shared.b32 $0, [ $1 + 0 ];", "=r,r,b"(ptr addrspace(3) %102, i1 %101) #6, !dbg !22
  %191 = bitcast i32 %190 to float, !dbg !22
  %192 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %190, i32 4, i32 31), !dbg !22
  %193 = bitcast i32 %192 to float, !dbg !22
  %194 = fadd float %191, %193, !dbg !24
  %195 = bitcast float %194 to i32, !dbg !22
  %196 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %195, i32 2, i32 31), !dbg !22
  %197 = bitcast i32 %196 to float, !dbg !22
  %198 = fadd float %194, %197, !dbg !24
  %199 = bitcast float %198 to i32, !dbg !22
  %200 = tail call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %199, i32 1, i32 31), !dbg !22
  %201 = bitcast i32 %200 to float, !dbg !22
  %202 = fadd float %198, %201, !dbg !24
  %203 = bitcast float %202 to <1 x i32>, !dbg !22
  tail call void asm sideeffect "@$2 st.shared.b32 [ $0 + 0 ], $1;", "r,r,b"(ptr addrspace(3) %102, <1 x i32> %203, i1 %118) #6, !dbg !22
  tail call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0), !dbg !22
  %204 = load float, ptr addrspace(3) @global_smem, align 16, !dbg !22
  %205 = tail call float @llvm.nvvm.div.full(float %204, float 4.096000e+03), !dbg !25
  %206 = fadd float %205, 0x3EE4F8B580000000, !dbg !26
  %207 = tail call i32 @__nvvm_reflect(ptr nonnull @.str) #6, !dbg !27
  %208 = tail call i32 @__nvvm_reflect(ptr nonnull @.str) #6, !dbg !27
  %209 = tail call i32 @__nvvm_reflect(ptr nonnull @.str) #6, !dbg !27
  %210 = tail call i32 @__nvvm_reflect(ptr nonnull @.str) #6, !dbg !27
  %.not.i7 = icmp eq i32 %210, 0, !dbg !27
  br i1 %.not.i7, label %213, label %211, !dbg !27

211:                                              ; preds = %__nv_rsqrtf.exit
  %212 = tail call float @llvm.nvvm.rsqrt.approx.ftz.f(float %206), !dbg !27
  br label %__nv_rsqrtf.exit9, !dbg !27

213:                                              ; preds = %__nv_rsqrtf.exit
  %214 = tail call float @llvm.nvvm.rsqrt.approx.f(float %206), !dbg !27
  br label %__nv_rsqrtf.exit9, !dbg !27

__nv_rsqrtf.exit9:                                ; preds = %211, %213
  %.0.i8 = phi float [ %212, %211 ], [ %214, %213 ], !dbg !27
  %215 = fmul float %122, %.0.i8, !dbg !28
  %216 = fmul float %123, %.0.i8, !dbg !28
  %217 = fmul float %124, %.0.i8, !dbg !28
  %218 = fmul float %125, %.0.i8, !dbg !28
  %219 = fmul float %126, %.0.i8, !dbg !28
  %220 = fmul float %127, %.0.i8, !dbg !28
  %221 = fmul float %128, %.0.i8, !dbg !28
  %222 = fmul float %129, %.0.i8, !dbg !28
  %223 = fmul float %130, %.0.i8, !dbg !28
  %224 = fmul float %131, %.0.i8, !dbg !28
  %225 = fmul float %132, %.0.i8, !dbg !28
  %226 = fmul float %133, %.0.i8, !dbg !28
  %227 = fmul float %134, %.0.i8, !dbg !28
  %228 = fmul float %135, %.0.i8, !dbg !28
  %229 = fmul float %136, %.0.i8, !dbg !28
  %230 = fmul float %137, %.0.i8, !dbg !28
  %231 = getelementptr float, ptr addrspace(1) %1, i64 %19, !dbg !29
  %232 = getelementptr float, ptr addrspace(1) %1, i64 %21, !dbg !29
  %233 = getelementptr float, ptr addrspace(1) %1, i64 %23, !dbg !29
  %234 = getelementptr float, ptr addrspace(1) %1, i64 %25, !dbg !29
  %235 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %231) #6, !dbg !30
  %236 = extractvalue { i32, i32, i32, i32 } %235, 0, !dbg !30
  %237 = extractvalue { i32, i32, i32, i32 } %235, 1, !dbg !30
  %238 = extractvalue { i32, i32, i32, i32 } %235, 2, !dbg !30
  %239 = extractvalue { i32, i32, i32, i32 } %235, 3, !dbg !30
  %240 = bitcast i32 %236 to float, !dbg !30
  %241 = bitcast i32 %237 to float, !dbg !30
  %242 = bitcast i32 %238 to float, !dbg !30
  %243 = bitcast i32 %239 to float, !dbg !30
  %244 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %232) #6, !dbg !30
  %245 = extractvalue { i32, i32, i32, i32 } %244, 0, !dbg !30
  %246 = extractvalue { i32, i32, i32, i32 } %244, 1, !dbg !30
  %247 = extractvalue { i32, i32, i32, i32 } %244, 2, !dbg !30
  %248 = extractvalue { i32, i32, i32, i32 } %244, 3, !dbg !30
  %249 = bitcast i32 %245 to float, !dbg !30
  %250 = bitcast i32 %246 to float, !dbg !30
  %251 = bitcast i32 %247 to float, !dbg !30
  %252 = bitcast i32 %248 to float, !dbg !30
  %253 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %233) #6, !dbg !30
  %254 = extractvalue { i32, i32, i32, i32 } %253, 0, !dbg !30
  %255 = extractvalue { i32, i32, i32, i32 } %253, 1, !dbg !30
  %256 = extractvalue { i32, i32, i32, i32 } %253, 2, !dbg !30
  %257 = extractvalue { i32, i32, i32, i32 } %253, 3, !dbg !30
  %258 = bitcast i32 %254 to float, !dbg !30
  %259 = bitcast i32 %255 to float, !dbg !30
  %260 = bitcast i32 %256 to float, !dbg !30
  %261 = bitcast i32 %257 to float, !dbg !30
  %262 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %234) #6, !dbg !30
  %263 = extractvalue { i32, i32, i32, i32 } %262, 0, !dbg !30
  %264 = extractvalue { i32, i32, i32, i32 } %262, 1, !dbg !30
  %265 = extractvalue { i32, i32, i32, i32 } %262, 2, !dbg !30
  %266 = extractvalue { i32, i32, i32, i32 } %262, 3, !dbg !30
  %267 = bitcast i32 %263 to float, !dbg !30
  %268 = bitcast i32 %264 to float, !dbg !30
  %269 = bitcast i32 %265 to float, !dbg !30
  %270 = bitcast i32 %266 to float, !dbg !30
  %271 = fmul float %215, %240, !dbg !31
  %272 = fmul float %216, %241, !dbg !31
  %273 = fmul float %217, %242, !dbg !31
  %274 = fmul float %218, %243, !dbg !31
  %275 = fmul float %219, %249, !dbg !31
  %276 = fmul float %220, %250, !dbg !31
  %277 = fmul float %221, %251, !dbg !31
  %278 = fmul float %222, %252, !dbg !31
  %279 = fmul float %223, %258, !dbg !31
  %280 = fmul float %224, %259, !dbg !31
  %281 = fmul float %225, %260, !dbg !31
  %282 = fmul float %226, %261, !dbg !31
  %283 = fmul float %227, %267, !dbg !31
  %284 = fmul float %228, %268, !dbg !31
  %285 = fmul float %229, %269, !dbg !31
  %286 = fmul float %230, %270, !dbg !31
  %287 = getelementptr float, ptr addrspace(1) %2, i64 %19, !dbg !32
  %288 = getelementptr float, ptr addrspace(1) %2, i64 %21, !dbg !32
  %289 = getelementptr float, ptr addrspace(1) %2, i64 %23, !dbg !32
  %290 = getelementptr float, ptr addrspace(1) %2, i64 %25, !dbg !32
  %291 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %287) #6, !dbg !33
  %292 = extractvalue { i32, i32, i32, i32 } %291, 0, !dbg !33
  %293 = extractvalue { i32, i32, i32, i32 } %291, 1, !dbg !33
  %294 = extractvalue { i32, i32, i32, i32 } %291, 2, !dbg !33
  %295 = extractvalue { i32, i32, i32, i32 } %291, 3, !dbg !33
  %296 = bitcast i32 %292 to float, !dbg !33
  %297 = bitcast i32 %293 to float, !dbg !33
  %298 = bitcast i32 %294 to float, !dbg !33
  %299 = bitcast i32 %295 to float, !dbg !33
  %300 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %288) #6, !dbg !33
  %301 = extractvalue { i32, i32, i32, i32 } %300, 0, !dbg !33
  %302 = extractvalue { i32, i32, i32, i32 } %300, 1, !dbg !33
  %303 = extractvalue { i32, i32, i32, i32 } %300, 2, !dbg !33
  %304 = extractvalue { i32, i32, i32, i32 } %300, 3, !dbg !33
  %305 = bitcast i32 %301 to float, !dbg !33
  %306 = bitcast i32 %302 to float, !dbg !33
  %307 = bitcast i32 %303 to float, !dbg !33
  %308 = bitcast i32 %304 to float, !dbg !33
  %309 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %289) #6, !dbg !33
  %310 = extractvalue { i32, i32, i32, i32 } %309, 0, !dbg !33
  %311 = extractvalue { i32, i32, i32, i32 } %309, 1, !dbg !33
  %312 = extractvalue { i32, i32, i32, i32 } %309, 2, !dbg !33
  %313 = extractvalue { i32, i32, i32, i32 } %309, 3, !dbg !33
  %314 = bitcast i32 %310 to float, !dbg !33
  %315 = bitcast i32 %311 to float, !dbg !33
  %316 = bitcast i32 %312 to float, !dbg !33
  %317 = bitcast i32 %313 to float, !dbg !33
  %318 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %290) #6, !dbg !33
  %319 = extractvalue { i32, i32, i32, i32 } %318, 0, !dbg !33
  %320 = extractvalue { i32, i32, i32, i32 } %318, 1, !dbg !33
  %321 = extractvalue { i32, i32, i32, i32 } %318, 2, !dbg !33
  %322 = extractvalue { i32, i32, i32, i32 } %318, 3, !dbg !33
  %323 = bitcast i32 %319 to float, !dbg !33
  %324 = bitcast i32 %320 to float, !dbg !33
  %325 = bitcast i32 %321 to float, !dbg !33
  %326 = bitcast i32 %322 to float, !dbg !33
  %327 = fadd float %271, %296, !dbg !34
  %328 = fadd float %272, %297, !dbg !34
  %329 = fadd float %273, %298, !dbg !34
  %330 = fadd float %274, %299, !dbg !34
  %331 = fadd float %275, %305, !dbg !34
  %332 = fadd float %276, %306, !dbg !34
  %333 = fadd float %277, %307, !dbg !34
  %334 = fadd float %278, %308, !dbg !34
  %335 = fadd float %279, %314, !dbg !34
  %336 = fadd float %280, %315, !dbg !34
  %337 = fadd float %281, %316, !dbg !34
  %338 = fadd float %282, %317, !dbg !34
  %339 = fadd float %283, %323, !dbg !34
  %340 = fadd float %284, %324, !dbg !34
  %341 = fadd float %285, %325, !dbg !34
  %342 = fadd float %286, %326, !dbg !34
  %343 = getelementptr float, ptr addrspace(1) %3, i64 %8, !dbg !35
  %344 = getelementptr float, ptr addrspace(1) %343, i64 %19, !dbg !36
  %345 = getelementptr float, ptr addrspace(1) %343, i64 %21, !dbg !36
  %346 = getelementptr float, ptr addrspace(1) %343, i64 %23, !dbg !36
  %347 = getelementptr float, ptr addrspace(1) %343, i64 %25, !dbg !36
  %348 = bitcast float %327 to i32, !dbg !37
  %349 = bitcast float %328 to i32, !dbg !37
  %350 = bitcast float %329 to i32, !dbg !37
  %351 = bitcast float %330 to i32, !dbg !37
  tail call void asm sideeffect "st.global.v4.b32 [ $4 + 0 ], { $0, $1, $2, $3 };", "r,r,r,r,l"(i32 %348, i32 %349, i32 %350, i32 %351, ptr addrspace(1) %344) #6, !dbg !37
  %352 = bitcast float %331 to i32, !dbg !37
  %353 = bitcast float %332 to i32, !dbg !37
  %354 = bitcast float %333 to i32, !dbg !37
  %355 = bitcast float %334 to i32, !dbg !37
  tail call void asm sideeffect "st.global.v4.b32 [ $4 + 0 ], { $0, $1, $2, $3 };", "r,r,r,r,l"(i32 %352, i32 %353, i32 %354, i32 %355, ptr addrspace(1) %345) #6, !dbg !37
  %356 = bitcast float %335 to i32, !dbg !37
  %357 = bitcast float %336 to i32, !dbg !37
  %358 = bitcast float %337 to i32, !dbg !37
  %359 = bitcast float %338 to i32, !dbg !37
  tail call void asm sideeffect "st.global.v4.b32 [ $4 + 0 ], { $0, $1, $2, $3 };", "r,r,r,r,l"(i32 %356, i32 %357, i32 %358, i32 %359, ptr addrspace(1) %346) #6, !dbg !37
  %360 = bitcast float %339 to i32, !dbg !37
  %361 = bitcast float %340 to i32, !dbg !37
  %362 = bitcast float %341 to i32, !dbg !37
  %363 = bitcast float %342 to i32, !dbg !37
  tail call void asm sideeffect "st.global.v4.b32 [ $4 + 0 ], { $0, $1, $2, $3 };", "r,r,r,r,l"(i32 %360, i32 %361, i32 %362, i32 %363, ptr addrspace(1) %347) #6, !dbg !37
  ret void, !dbg !38
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 0, 2147483647) i32 @llvm.nvvm.read.ptx.sreg.ctaid.x() #1

; Function Attrs: mustprogress nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 0, 1024) i32 @llvm.nvvm.read.ptx.sreg.tid.x() #1

; Function Attrs: convergent nocallback nounwind memory(inaccessiblemem: readwrite)
declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32) #2

; Function Attrs: convergent nocallback nounwind
declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32) #3

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(none)
declare float @llvm.nvvm.div.full(float, float) #4

declare i32 @__nvvm_reflect(ptr) local_unnamed_addr #5

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(none)
declare float @llvm.nvvm.rsqrt.approx.ftz.f(float) #4

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(none)
declare float @llvm.nvvm.rsqrt.approx.f(float) #4

attributes #0 = { nounwind "nvvm.reqntid"="256" }
attributes #1 = { mustprogress nocallback nofree nosync nounwind speculatable willreturn memory(none) }
attributes #2 = { convergent nocallback nounwind memory(inaccessiblemem: readwrite) }
attributes #3 = { convergent nocallback nounwind }
attributes #4 = { mustprogress nocallback nofree nosync nounwind willreturn memory(none) }
attributes #5 = { "disable-tail-calls"="false" "frame-pointer"="all" "less-precise-fpmad"="false" "no-infs-fp-math"="false" "no-nans-fp-math"="false" "stack-protector-buffer-size"="8" "unsafe-fp-math"="false" "use-soft-float"="false" }
attributes #6 = { nounwind }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}
!llvm.ident = !{!3}

!0 = distinct !DICompileUnit(language: DW_LANG_C, file: !1, producer: "triton", isOptimized: true, runtimeVersion: 0, emissionKind: LineTablesOnly)
!1 = !DIFile(filename: "layer_norm_kernel_4358931acf683ebe.py", directory: "/tmp/pallas-prof-cache/kernels")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!3 = !{!"clang version 3.8.0 (tags/RELEASE_380/final)"}
!4 = distinct !DISubprogram(name: "layer_norm_kernel", linkageName: "layer_norm_kernel", scope: !1, file: !1, line: 11, type: !5, scopeLine: 11, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0)
!5 = !DISubroutineType(cc: DW_CC_normal, types: !6)
!6 = !{}
!7 = !DILocation(line: 12, column: 25, scope: !4)
!8 = !DILocation(line: 15, column: 45, scope: !4)
!9 = !DILocation(line: 15, column: 24, scope: !4)
!10 = !DILocation(line: 15, column: 62, scope: !4)
!11 = !DILocation(line: 15, column: 52, scope: !4)
!12 = !DILocation(line: 15, column: 16, scope: !4)
!13 = !DILocation(line: 263, column: 15, scope: !14, inlinedAt: !16)
!14 = distinct !DILexicalBlockFile(scope: !4, file: !15, discriminator: 0)
!15 = !DIFile(filename: "standard.py", directory: "/opt/torch/.venv/lib/python3.12/site-packages/triton/language")
!16 = !DILocation(line: 293, column: 36, scope: !14, inlinedAt: !17)
!17 = !DILocation(line: 16, column: 17, scope: !18)
!18 = distinct !DILexicalBlockFile(scope: !4, file: !1, discriminator: 0)
!19 = !DILocation(line: 18, column: 19, scope: !4)
!20 = !DILocation(line: 19, column: 14, scope: !4)
!21 = !DILocation(line: 20, column: 16, scope: !4)
!22 = !DILocation(line: 293, column: 36, scope: !14, inlinedAt: !23)
!23 = !DILocation(line: 21, column: 19, scope: !18)
!24 = !DILocation(line: 263, column: 15, scope: !14, inlinedAt: !22)
!25 = !DILocation(line: 23, column: 23, scope: !4)
!26 = !DILocation(line: 24, column: 18, scope: !4)
!27 = !DILocation(line: 25, column: 28, scope: !4)
!28 = !DILocation(line: 26, column: 18, scope: !4)
!29 = !DILocation(line: 29, column: 52, scope: !4)
!30 = !DILocation(line: 29, column: 16, scope: !4)
!31 = !DILocation(line: 30, column: 20, scope: !4)
!32 = !DILocation(line: 33, column: 52, scope: !4)
!33 = !DILocation(line: 33, column: 16, scope: !4)
!34 = !DILocation(line: 34, column: 20, scope: !4)
!35 = !DILocation(line: 37, column: 21, scope: !4)
!36 = !DILocation(line: 37, column: 49, scope: !4)
!37 = !DILocation(line: 37, column: 69, scope: !4)
!38 = !DILocation(line: 37, column: 4, scope: !4)
